"""The nemesis over a fake backend and a recording proxy client: steps at their times, durations
heal, errors recorded (the run goes on), heal_everything ends every fault and restores every group."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from harness.contracts.faultlog import FaultLog, read_windows
from harness.faults.apply import Faults
from harness.faults.nemesis import Nemesis
from harness.faults.schedule import Schedule, Step

from .fakes import FakeBackend, FakeProxy, fake_plan

SLACK = 0.5  # generous: two busy cores


def run(tmp_path: Path, *steps: Step, backend: Any = None) -> tuple[Nemesis, FakeBackend, FakeProxy, float]:
    be = backend or FakeBackend(fake_plan(tmp_path))
    proxy = FakeProxy()
    faults = Faults(be.plan, be, proxy, FaultLog(tmp_path / "faults.jsonl", "t"))  # type: ignore[arg-type]
    nem = Nemesis(faults, Schedule(steps=list(steps)))
    t0 = time.monotonic()
    nem.start(t0)
    nem.wait(timeout=10)
    assert nem.done()
    return nem, be, proxy, t0


def test_steps_run_at_their_times_on_resolved_targets(tmp_path: Path) -> None:
    nem, be, proxy, t0 = run(
        tmp_path,
        Step(at=0.6, fault="latency", target="slave:b", params={"latency_ms": 40}),
        Step(at=0.2, fault="kill", target="master:a"),
    )
    assert nem.errors() == []
    [(t_kill, _, victim)] = [c for c in be.calls if c[1] == "kill"]
    latency = [(t, args) for t, what, args in proxy.calls if what == "latency"]
    assert victim == "a-1" and 0.2 <= t_kill - t0 < 0.2 + SLACK
    assert sorted(a for _, a in latency) == sorted((lk.name, 40, 0) for lk in be.plan.links_of("b-2"))
    assert all(0.6 <= t - t0 < 0.6 + SLACK for t, _ in latency)
    assert [o.targets for o in nem.outcomes] == [["a-1"], ["b-2"]]  # in time order
    windows = read_windows(tmp_path / "faults.jsonl").windows
    assert [(w.fault, w.params.get("new_master")) for w in windows] == [("kill", "a-2"), ("latency", None)]


def test_a_duration_heals_its_step(tmp_path: Path) -> None:
    nem, be, proxy, t0 = run(
        tmp_path,
        Step(at=0.1, fault="pause", target="b-1", duration=0.4),
        Step(at=0.1, fault="kill", target="a-1", duration=0.3),
        Step(at=0.1, fault="partition", target="bridges", duration=0.2),
    )
    assert nem.errors() == []
    resumed = [t for t, w, b in be.calls if w == "resume"]
    started = [t for t, w, b in be.calls if (w, b) == ("start_broker", "a-1")]
    healed = [t for t, w, _ in proxy.calls if w == "heal"]
    assert len(resumed) == 1 and 0.5 <= resumed[0] - t0 < 0.5 + SLACK
    assert len(started) == 1 and 0.4 <= started[0] - t0 < 0.4 + SLACK
    assert healed and all(0.3 <= t - t0 < 0.3 + SLACK for t in healed)
    assert {a[0] for a in proxy.called("heal")} == {lk.name for lk in be.plan.links if lk.kind == "bridge"}
    assert be.state("a-1") == "slave" and be.state("b-1") != "paused"
    windows = read_windows(tmp_path / "faults.jsonl").windows
    assert all(w.end is not None for w in windows)
    assert sorted(w.fault for w in windows) == ["kill", "partition", "pause", "start"]


def test_a_failing_step_is_recorded_and_the_others_run(tmp_path: Path) -> None:
    nem, be, proxy, _ = run(
        tmp_path,
        Step(at=0.0, fault="isolate", target="a-1", duration=1),  # the fake local backend has no networks
        Step(at=0.0, fault="down", target="no-such-link"),
        Step(at=0.1, fault="pause", target="slave:nogroup"),
        Step(at=0.2, fault="stop", target="b-1"),
    )
    errors = nem.errors()
    assert len(errors) == 3, errors
    assert "step isolate@0.0s a-1: BackendError: the FakeBackend cannot isolate brokers" in errors[0]
    assert "unknown fault target 'no-such-link'" in errors[1]
    assert "unknown group 'nogroup'" in errors[2]
    assert be.called("stop") == ["b-1"]
    assert [w.fault for w in read_windows(tmp_path / "faults.jsonl").windows] == ["stop"]


def test_heal_everything_stops_pending_steps_ends_open_faults_and_restores_groups(tmp_path: Path) -> None:
    be = FakeBackend(fake_plan(tmp_path))
    proxy = FakeProxy()
    faults = Faults(be.plan, be, proxy, FaultLog(tmp_path / "faults.jsonl", "t"))  # type: ignore[arg-type]
    nem = Nemesis(
        faults,
        Schedule(
            steps=[
                Step(at=0.0, fault="kill", target="members:a"),  # no duration: dead until healed
                Step(at=0.0, fault="pause", target="b-1"),
                Step(at=0.0, fault="down", target="b-2", duration=60),
                Step(at=30, fault="stop", target="b-2"),  # never reached
            ]
        ),
    )
    nem.start()
    deadline = time.monotonic() + 5
    while len(read_windows(tmp_path / "faults.jsonl").windows) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    t = time.monotonic()
    nem.heal_everything()
    assert time.monotonic() - t < 5, "pending steps and durations must not delay the heal"
    assert nem.errors() == []
    assert not be.called("stop")
    assert {be.master("a"), be.master("b")} - {None} and all(be.alive(b) for b in be.plan.brokers)
    assert be.state("b-1") != "paused"
    assert proxy.called("reset") and not be.mirror.held
    windows = read_windows(tmp_path / "faults.jsonl").windows
    assert all(w.end is not None for w in windows)
    assert sorted(w.fault for w in windows if w.params.get("healed_by") == "heal_all") == ["down", "pause"]
    assert sorted(w.target for w in windows if w.fault == "start") == ["a-1", "a-2"]


@pytest.mark.parametrize(
    ("target", "want"),
    [("master:a", ["a-1"]), ("slave:a", ["a-2"]), ("members:b", ["b-1", "b-2"]), ("bridges", ["bridges"])],
)
def test_roles_resolve_when_the_step_runs(tmp_path: Path, target: str, want: list[str]) -> None:
    be = FakeBackend(fake_plan(tmp_path))
    faults = Faults(be.plan, be, FakeProxy(), FaultLog(tmp_path / "f.jsonl", "t"))  # type: ignore[arg-type]
    assert faults.resolve(target) == want
    be.kill("a-1")
    assert faults.resolve("master:a") == ["a-2"]
    with pytest.raises(ValueError, match="no live slave"):
        faults.resolve("slave:a")


def test_faults_start_resolves_roles_itself(tmp_path: Path) -> None:
    """The one way to apply a fault: a test by hand (FaultHandle) names roles as a schedule does."""
    be = FakeBackend(fake_plan(tmp_path))
    faults = Faults(be.plan, be, FakeProxy(), FaultLog(tmp_path / "f.jsonl", "t"))  # type: ignore[arg-type]
    handle = faults.start("pause", ["master:a", "slave:a"])
    assert handle.targets == ["a-1", "a-2"] and be.called("pause") == ["a-1", "a-2"]
    assert faults.kill("master:b") is not None and be.called("kill") == ["b-1"]
    faults.restore()
    assert all(be.alive(b) for b in be.plan.brokers) and be.called("start_broker") == ["b-1"]
    assert be.called("resume") == ["a-1", "a-2"]
    windows = read_windows(tmp_path / "f.jsonl").windows
    assert all(w.end is not None for w in windows)
