"""Generated chaos: a Hypothesis strategy for fault schedules on a pair, and the property they must keep.

Property: no at-least-once message lost, nothing unexpected, every drop explained by an outage
longer than the publisher timeout, and every agent receives again after the heal.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from hypothesis import strategies as st

from harness.faults.kinds import KINDS
from harness.faults.schedule import Schedule, Step

TARGETS = ("master:pair", "slave:pair", "pair-1", "pair-2")
FAULTS = tuple(k.name for k in KINDS.values() if k.chaos)  # registry order: draws stay reproducible
LINK_PARAMS = {  # the values drawn steps use (schedules elsewhere get the kinds' defaults)
    "latency": {"latency_ms": 200, "jitter_ms": 100},
    "bandwidth": {"rate_kbps": 16},
    "slicer": {"average_size": 32, "size_variation": 16, "delay_us": 200},
    "reset_peer": {"timeout_ms": 100},
}


@st.composite
def steps(draw: st.DrawFn, budget_s: float) -> Step:
    fault = draw(st.sampled_from(FAULTS))
    at = draw(st.integers(min_value=1, max_value=int(budget_s) - 2))
    target = draw(st.sampled_from(TARGETS))
    duration: float | None = None
    kind = KINDS[fault]
    if kind.ends_itself:  # a dead broker may stay dead until the final heal
        duration = draw(st.sampled_from([None, 3.0, 6.0]))
    elif kind.heals_by is not None:
        duration = float(draw(st.integers(min_value=1, max_value=8)))
    return Step(
        at=float(at), fault=fault, target=target, duration=duration, params=LINK_PARAMS.get(fault, {})
    )


@st.composite
def schedules(draw: st.DrawFn, budget_s: float = 16.0, max_steps: int = 3) -> Schedule:
    """Schedules of 1..max_steps faults starting within `budget_s` seconds of traffic."""
    seed = draw(st.integers(min_value=0, max_value=2**16))
    chosen = draw(st.lists(steps(budget_s), min_size=1, max_size=max_steps))
    return Schedule(seed=seed, steps=sorted(chosen, key=lambda s: s.at), settle_s=8.0)


def save_schedule(schedule: Schedule, folder: Path) -> Path:
    """Write the schedule as a replayable file: `bfh run --schedule FILE` replays it."""
    folder.mkdir(parents=True, exist_ok=True)
    body = json.dumps(schedule.model_dump(mode="json"), sort_keys=True)
    path = folder / f"schedule-{hashlib.sha1(body.encode()).hexdigest()[:10]}.json"
    schedule.to_file(path)
    return path


class Budget:
    """Wall-time budget for a property run; once spent, further examples (and shrinking) stop."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def spent(self) -> bool:
        return time.monotonic() > self.deadline
