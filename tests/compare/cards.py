"""Hand-made `bfh-scorecard/1` scorecards for the comparison's tests (no broker, no run)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Measures = dict[str, list[float]]


def card(
    rounds: Sequence[Measures],
    entry: str = "masterslave",
    seeds: Sequence[int] | None = None,
    promises: Sequence[dict[str, str]] | None = None,
    version: str = "1.0",
) -> dict[str, Any]:
    """A scorecard of one entry: round i has measures rounds[i], seed seeds[i] (1, 2, ...)."""
    seeds = list(seeds) if seeds is not None else list(range(1, len(rounds) + 1))
    out = []
    for i, measures in enumerate(rounds):
        kept = promises[i] if promises is not None else {"recovery": "pass", "at_least_once": "pass"}
        out.append(
            {
                "run_id": f"run-{entry}-{seeds[i]}",
                "seed": seeds[i],
                "verdict": "fail" if "fail" in kept.values() else "pass",
                "promises": kept,
                "measures": measures,
                "load": {"load_avg_max": 1.0},
            }
        )
    return {
        "schema": "bfh-scorecard/1",
        "source": "bfh run",
        "agent": {"version": version, "command": "agent", "command_sha256": ""},
        "entries": [{"entry": entry, "rounds": out}],
    }


def recovery(values: Sequence[float], **more: Callable[[int], list[float]]) -> list[Measures]:
    """Rounds whose recovery_s is one value each (and any other measure by a function of i)."""
    return [
        {"recovery_s[publisher]": [v], **{k: f(i) for k, f in more.items()}} for i, v in enumerate(values)
    ]


REF = [2.1, 2.4, 1.9, 2.6, 2.2]  # a reference's recovery per round, s
SLOW = [6.3, 7.1, 5.8, 6.9, 6.4]  # 3x slower
