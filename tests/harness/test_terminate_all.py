"""procs.terminate_all: every process signalled first, then one shared deadline (issue 33: one
by one, 100 agents took 22 s to stop)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from harness import procs


def test_all_are_signalled_before_any_is_waited_for(tmp_path: Path) -> None:
    # each takes 1 s to exit after SIGTERM: one by one that is 6 s, in parallel about 1 s
    slow = ["bash", "-c", "trap 'sleep 1; exit 3' TERM; while :; do sleep 0.1; done"]
    ps = [procs.spawn(f"slow-{i}", slow, tmp_path / f"{i}.log") for i in range(6)]
    time.sleep(0.5)  # the traps are set
    t0 = time.monotonic()
    codes = procs.terminate_all(ps, timeout=10.0)
    took = time.monotonic() - t0
    assert codes == [3] * 6
    assert took < 4.0, f"{took:.1f}s: stopped one by one"
    assert not any(p.alive() for p in ps)


def test_one_that_ignores_sigterm_is_killed_at_the_deadline(tmp_path: Path) -> None:
    stubborn = procs.spawn("stubborn", ["bash", "-c", "trap '' TERM; sleep 60"], tmp_path / "s.log")
    quick = procs.spawn("quick", ["sleep", "60"], tmp_path / "q.log")
    time.sleep(0.3)
    t0 = time.monotonic()
    codes = procs.terminate_all([stubborn, quick], timeout=1.5)
    assert 1.4 < time.monotonic() - t0 < 6.0
    assert codes == [-signal.SIGKILL, -signal.SIGTERM]
    assert procs.terminate_all([stubborn, quick]) == codes  # already gone: the same codes, at once
