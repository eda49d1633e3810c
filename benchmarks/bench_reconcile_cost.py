"""Benchmark: the reconcile's fixed cost on a scenario-sized run, where it goes and how many Spark
jobs it runs.

    pytest benchmarks/bench_reconcile_cost.py -m benchmark -s -p no:xdist
    BFH_BENCH_RUN=reports/<run> BFH_BENCH_REPEAT=5 pytest benchmarks/bench_reconcile_cost.py ...

The run (default: the masterslave re-judge fixture, a real run) is copied to a scratch folder
before every reconcile, its analysis/ removed, so each reconcile stages its logs again as a new
run would. Three measures, each the median of ``BFH_BENCH_REPEAT`` (default 3):

- cold: ``bfh reconcile RUN`` in a fresh process, wall and CPU seconds of its process tree;
- the breakdown of a fresh process: imports, the JVM's start, the session, the first reconcile
  (its stages' seconds and Spark job count);
- warm: later reconciles on that session (their stages and job count), ``BFH_BENCH_WARM`` of them
  (default 5), the median of the last three reported.

``BFH_BENCH_CONNECT=1`` adds warm reconciles on a Spark Connect server (the pytest suite's shared
server), CPU seconds of client and server. Results are appended to
``/tmp/bfh-bench-results.jsonl``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
RUN = Path(
    os.environ.get("BFH_BENCH_RUN") or REPO / "tests/fixtures/rejudge/20261126-144907-masterslave-fb73"
)
REPEAT = int(os.environ.get("BFH_BENCH_REPEAT", "3"))
WARM = max(3, int(os.environ.get("BFH_BENCH_WARM", "5")))
RESULTS = Path(tempfile.gettempdir()) / "bfh-bench-results.jsonl"

pytestmark = [pytest.mark.benchmark, pytest.mark.spark, pytest.mark.timeout(3600)]


def fresh_copy(run: Path) -> Path:
    d = Path(tempfile.mkdtemp(prefix="bfh-bench-cost-")) / run.name
    shutil.copytree(run, d)
    shutil.rmtree(d / "analysis", ignore_errors=True)
    return d


def _tree_cpu(pids: list[int]) -> float:
    import psutil

    total = 0.0
    for pid in pids:
        try:
            root = psutil.Process(pid)
            for p in [root, *root.children(recursive=True)]:
                t = p.cpu_times()
                total += t.user + t.system
        except psutil.Error:
            pass
    return total


def breakdown(run: Path, warm: int, connect: bool) -> dict[str, Any]:
    """In this (fresh) process: where a cold start's seconds go, then warm reconciles."""
    if connect:
        os.environ["BFH_SPARK_CONNECT_OWNER"] = str(os.getpid())
    t0 = time.monotonic()
    from spark_analysis import session
    from spark_analysis.reconcile import reconcile

    out: dict[str, Any] = {"imports_s": round(time.monotonic() - t0, 2)}
    server_pid: list[int] = []
    launch, jvm_s = session._launch_jvm, [0.0]

    def timed_launch(conf: dict[str, str]) -> None:  # the JVM alone, inside get_spark
        t = time.monotonic()
        launch(conf)
        jvm_s[0] = time.monotonic() - t

    session._launch_jvm = timed_launch  # type: ignore[assignment]
    t = time.monotonic()
    spark = session.get_spark(small=True)
    out["jvm_s"] = round(jvm_s[0], 2)
    out["session_s"] = round(time.monotonic() - t - jvm_s[0], 2)
    if connect:
        from spark_analysis.shared_server import _state_path

        server_pid = [json.loads(_state_path(os.getpid()).read_text())["pid"]]

    def jobs() -> int:
        if connect:
            return -1  # a Connect session has no status tracker here
        return len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))

    rounds = []
    try:
        for _ in range(warm + 1):
            d = fresh_copy(run)
            j, c = jobs(), _tree_cpu([os.getpid(), *server_pid])
            t = time.monotonic()
            (summary,) = reconcile([d], spark=spark)
            rounds.append(
                {
                    "wall_s": round(time.monotonic() - t, 2),
                    "cpu_s": round(_tree_cpu([os.getpid(), *server_pid]) - c, 2),
                    "jobs": jobs() - j if j >= 0 else None,
                    "stages_s": summary["engine"]["timings_s"],
                }
            )
            shutil.rmtree(d.parent, ignore_errors=True)
    finally:
        if connect:
            from spark_analysis.shared_server import stop

            stop(os.getpid())
    out["first"] = rounds[0]
    last = rounds[-3:]
    out["warm"] = {
        "median_wall_s": statistics.median(r["wall_s"] for r in last),
        "median_cpu_s": statistics.median(r["cpu_s"] for r in last),
        "jobs": last[-1]["jobs"],
        "stages_s": last[-1]["stages_s"],
        "wall_s": [r["wall_s"] for r in rounds[1:]],
    }
    return out


def _subprocess(*args: str) -> dict[str, Any]:
    res = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, cwd=REPO, timeout=1800
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def cold_cli(run: Path) -> dict[str, Any]:
    import psutil

    d = fresh_copy(run)
    bfh = Path(sys.executable).with_name("bfh")
    t = time.monotonic()
    proc = psutil.Popen([str(bfh), "reconcile", str(d)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    cpu: dict[int, float] = {}
    while proc.poll() is None:
        for p in [proc, *proc.children(recursive=True)]:
            try:
                ct = p.cpu_times()
                cpu[p.pid] = ct.user + ct.system + ct.children_user + ct.children_system
            except psutil.Error:
                pass
        time.sleep(0.05)
    wall = time.monotonic() - t
    err = proc.stderr.read().decode() if proc.stderr else ""
    shutil.rmtree(d.parent, ignore_errors=True)
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(sum(cpu.values()), 1),
        "rc": proc.returncode,
        "err": err[-500:],
    }


def test_reconcile_fixed_cost() -> None:
    records = sum(1 for f in RUN.glob("agents/**/*.jsonl") for _ in f.open())
    cold = [cold_cli(RUN) for _ in range(REPEAT)]
    assert all(c["rc"] == 0 for c in cold), cold
    parts = [_subprocess("breakdown", str(RUN)) for _ in range(REPEAT)]
    result: dict[str, Any] = {
        "bench": "reconcile_cost",
        "run": RUN.name,
        "agent_records": records,
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "cold_cli": {
            "median_wall_s": statistics.median(c["wall_s"] for c in cold),
            "median_cpu_s": statistics.median(c["cpu_s"] for c in cold),
            "wall_s": [c["wall_s"] for c in cold],
        },
        "breakdown": {k: statistics.median(p[k] for p in parts) for k in ("imports_s", "jvm_s", "session_s")},
        "first_reconcile": {
            "median_wall_s": statistics.median(p["first"]["wall_s"] for p in parts),
            "jobs": parts[-1]["first"]["jobs"],
            "stages_s": parts[-1]["first"]["stages_s"],
        },
        "warm_reconcile": {
            "median_wall_s": statistics.median(p["warm"]["median_wall_s"] for p in parts),
            "median_cpu_s": statistics.median(p["warm"]["median_cpu_s"] for p in parts),
            "jobs": parts[-1]["warm"]["jobs"],
            "stages_s": parts[-1]["warm"]["stages_s"],
        },
    }
    if os.environ.get("BFH_BENCH_CONNECT") == "1":
        conn = _subprocess("breakdown-connect", str(RUN))
        result["connect_warm_reconcile"] = conn["warm"]
    print(json.dumps(result, indent=2))
    with RESULTS.open("a") as f:
        f.write(json.dumps(result) + "\n")
    assert result["warm_reconcile"]["jobs"] > 0


if __name__ == "__main__":
    mode, run = sys.argv[1], Path(sys.argv[2])
    print(json.dumps(breakdown(run, WARM, connect=mode == "breakdown-connect")))
