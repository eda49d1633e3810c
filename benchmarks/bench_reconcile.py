"""Benchmark: the Spark reconciliation vs the pandas reference on synthetic histories.

    make bench                                   # = pytest benchmarks -m benchmark -s
    BFH_BENCH_SIZES=1000000,10000000 pytest benchmarks/bench_reconcile.py -m benchmark -s
    BFH_BENCH_SIZES=100000000 BFH_BENCH_PANDAS=0 ...   # 100M: Spark only

Each size is a synthetic run (``python -m spark_analysis.testing.synth``: N published messages, two
subscriptions each, ~0.5 % anomalies of every kind, 3 faults) staged as Parquet bucketed by msg_id
with its facts in the manifest (what a real run's logs are staged to once), then reconciled
``BFH_BENCH_REPEAT`` times (default 3) by each engine in a fresh process:
``python -m spark_analysis.reconcile RUN`` and the pandas reference
(tests/spark/pandas_reference.py). Reported: median wall time and peak RSS of the process tree
(psutil, sampled every 0.1 s). The pandas process is stopped when its resident memory passes
``BFH_BENCH_PANDAS_MEM_GB`` (default 16), so it fails cleanly instead of exhausting the shared
machine (a resident-memory cap: an address-space cap also counts what allocators only reserve).
Every Spark result is checked against the generator's ground truth.

Environment: ``BFH_BENCH_DIR`` (default /tmp/bfh-bench; removed afterwards unless
``BFH_BENCH_KEEP=1``), ``BFH_SPARK_DRIVER_MEMORY`` for the Spark runs (default 6g),
``BFH_BENCH_PANDAS_REPEAT`` (default ``BFH_BENCH_REPEAT``) runs of the pandas reference,
``BFH_BENCH_ENFORCE=1`` turns the issue's targets into assertions (otherwise they are reported),
``BFH_BENCH_ALL_PAIRS_REPEAT`` (default 1) runs with ``--all-pairs``, the full per-pair table.
Results are appended to ``$BFH_BENCH_DIR/../bfh-bench-results.jsonl``.

``test_jsonl_conversion_vs_job`` (size ``BFH_BENCH_JSONL_SIZE``, default 1M) rewrites a synthetic
run as raw agent JSONL and times one cold run (JSONL->Parquet stage + job) against warm runs that
reuse the staged Parquet.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH_DIR = Path(os.environ.get("BFH_BENCH_DIR", "/tmp/bfh-bench"))
SIZES = [int(x) for x in os.environ.get("BFH_BENCH_SIZES", "1000000,10000000").split(",") if x]
REPEAT = int(os.environ.get("BFH_BENCH_REPEAT", "3"))
PANDAS = os.environ.get("BFH_BENCH_PANDAS", "1") != "0"
#: the pandas reference is slow at 10M: fewer runs of it when time is short
PANDAS_REPEAT = int(os.environ.get("BFH_BENCH_PANDAS_REPEAT", str(REPEAT)))
PANDAS_MEM_GB = float(os.environ.get("BFH_BENCH_PANDAS_MEM_GB", "16"))
DRIVER_MEMORY = os.environ.get("BFH_SPARK_DRIVER_MEMORY", "6g")
ENFORCE = os.environ.get("BFH_BENCH_ENFORCE") == "1"
#: runs with ``--all-pairs`` (every pair in messages.parquet) per size: what the full table costs
ALL_PAIRS_REPEAT = int(os.environ.get("BFH_BENCH_ALL_PAIRS_REPEAT", "1"))
#: staged Parquet + messages.parquet + shuffle space per million messages (measured ~60+80 MB)
DISK_PER_MILLION = 400 << 20

# a 10M round (generation, 3 Spark and 3 pandas runs) takes ~15 min: past the suite's 900 s timeout
pytestmark = [pytest.mark.benchmark, pytest.mark.timeout(3 * 3600)]


def _measure(cmd: list[str], env: dict[str, str], limit_gb: float | None = None) -> dict[str, Any]:
    """Run ``cmd``; wall time, exit status and peak RSS of its whole process tree, which is killed
    when its RSS passes ``limit_gb``."""
    import psutil

    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    root = psutil.Process(proc.pid)
    peak = 0
    over = None
    cpu: dict[int, float] = {}  # last seen user+system seconds per process of the tree
    while proc.poll() is None:
        rss = 0
        try:
            for p in [root, *root.children(recursive=True)]:
                try:
                    rss += p.memory_info().rss
                    t = p.cpu_times()
                    cpu[p.pid] = t.user + t.system
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        peak = max(peak, rss)
        if limit_gb and rss > limit_gb * (1 << 30) and proc.poll() is None:
            over = f"stopped: resident memory {rss >> 20} MB passed the {limit_gb} GB cap"
            for p in [*root.children(recursive=True), root]:
                with contextlib.suppress(psutil.Error):
                    p.kill()
        time.sleep(0.1)
    out, err = proc.communicate()
    if over:
        err += "\n" + over
    log = None
    if proc.returncode != 0:  # the whole stderr: a JVM's cause is far above its last 2000 characters
        log = BENCH_DIR.parent / f"bfh-bench-failed-{os.getpid()}-{int(t0 * 1000)}.stderr"
        log.write_text(err)
    return {
        "stderr_log": str(log) if log else None,
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "wall_s": round(time.monotonic() - t0, 2),
        "cpu_s": round(sum(cpu.values()), 1),
        "peak_rss_mb": round(peak / (1 << 20)),
        "rc": proc.returncode,
        "stdout": out[-2000:],
        "stderr": err[-2000:],
    }


def _spark(run_dir: Path, *extra: str) -> dict[str, Any]:
    env = dict(os.environ, BFH_SPARK_DRIVER_MEMORY=DRIVER_MEMORY)
    cmd = [sys.executable, "-m", "spark_analysis.reconcile", str(run_dir), "--quiet", *extra]
    return _measure(cmd, env)


def _pandas(run_dir: Path) -> dict[str, Any]:
    return _measure([sys.executable, __file__, "pandas", str(run_dir)], dict(os.environ), PANDAS_MEM_GB)


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if r["rc"] == 0]
    if not ok:
        return {"completed": False, "runs": len(runs), "error": runs[-1]["stderr"][-400:]}
    return {
        "completed": True,
        "runs": len(ok),
        "median_wall_s": statistics.median(r["wall_s"] for r in ok),
        "wall_s": [r["wall_s"] for r in ok],
        "median_cpu_s": statistics.median(r["cpu_s"] for r in ok),
        "median_peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in ok),
        "timings_s": [r.get("timings_s") for r in ok],
        "load_avg": [r.get("load_avg") for r in ok],
    }


def _generate(run_dir: Path, messages: int) -> dict[str, Any]:
    """Generate and stage a synthetic run in a process of its own (its JVM is gone before the
    measured runs start); returns the ground truth."""
    env = dict(os.environ, BFH_SPARK_DRIVER_MEMORY=DRIVER_MEMORY)
    out = subprocess.run(
        [sys.executable, "-m", "spark_analysis.testing.synth", str(run_dir), str(messages)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _check_truth(run_dir: Path, truth: dict[str, Any]) -> None:
    _check_summary(json.loads((run_dir / "analysis" / "summary.json").read_text()), truth)


def _check_summary(s: dict[str, Any], truth: dict[str, Any]) -> None:
    for key in ("totals", "deliveries", "ghosts"):
        for k, v in truth[key].items():
            assert s[key][k] == v, (key, k, s[key][k], v)
    assert s["unexpected"] == truth["unexpected"]


@pytest.fixture(scope="module")
def bench_dir():
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    yield BENCH_DIR
    if os.environ.get("BFH_BENCH_KEEP") != "1":
        shutil.rmtree(BENCH_DIR, ignore_errors=True)


RESULTS: dict[int, dict[str, Any]] = {}


@pytest.mark.parametrize("messages", SIZES)
def test_reconcile_benchmark(bench_dir: Path, messages: int) -> None:
    free = shutil.disk_usage(bench_dir).free
    need = DISK_PER_MILLION * messages // 1_000_000
    if free < need * 1.5:
        pytest.skip(
            f"{messages:,} messages need ~{need >> 30} GiB free in {bench_dir}, have {free >> 30} GiB"
        )
    run_dir = bench_dir / f"bench-{messages}"
    shutil.rmtree(run_dir, ignore_errors=True)
    t0 = time.monotonic()
    truth = _generate(run_dir, messages)
    generated_s = round(time.monotonic() - t0, 1)
    staged_mb = (
        sum(p.stat().st_size for p in (run_dir / "analysis" / "events.parquet").rglob("*.parquet")) >> 20
    )

    def spark_runs(n: int, *extra: str) -> list[dict[str, Any]]:
        runs = []
        for _ in range(n):
            r = _spark(run_dir, *extra)
            assert r["rc"] == 0, r["stderr"]
            _check_truth(run_dir, truth)
            # the job's own stage timings (stage = JSONL->Parquet conversion, skipped when up to date)
            r["timings_s"] = json.loads((run_dir / "analysis" / "summary.json").read_text())["engine"].get(
                "timings_s"
            )
            runs.append(r)
        return runs

    result: dict[str, Any] = {
        "messages": messages,
        "records": truth["totals"]["attempted"] * 2 + truth["deliveries"]["expected"],
        "staged_parquet_mb": staged_mb,
        "generate_s": generated_s,
        "spark": _median(spark_runs(REPEAT)),
        "spark_driver_memory": DRIVER_MEMORY,
        "load_avg_1m": os.getloadavg()[0],
    }
    if ALL_PAIRS_REPEAT:  # what the full per-pair table costs (reconcile --all-pairs)
        result["spark_all_pairs"] = _median(spark_runs(ALL_PAIRS_REPEAT, "--all-pairs"))
    if PANDAS:
        pandas_runs = []
        for _ in range(PANDAS_REPEAT):
            r = _pandas(run_dir)
            pandas_runs.append(r)
            if r["rc"] != 0:
                break  # out of memory: it will not do better the next time
            # the baseline must reach the same verdict figures, or its time means nothing
            _check_summary(json.loads(r["stdout"].strip().splitlines()[-1]), truth)
        result["pandas"] = _median(pandas_runs)
        result["pandas_mem_limit_gb"] = PANDAS_MEM_GB
        if result["pandas"]["completed"]:
            result["speedup"] = round(result["pandas"]["median_wall_s"] / result["spark"]["median_wall_s"], 2)
    shutil.rmtree(run_dir, ignore_errors=True)
    RESULTS[messages] = result
    print("\n" + json.dumps(result, indent=1))
    with (bench_dir.parent / "bfh-bench-results.jsonl").open("a") as fh:
        fh.write(json.dumps(result) + "\n")
    if ENFORCE and messages == 10_000_000:
        assert result["spark"]["median_wall_s"] <= 60
        assert not result.get("pandas", {}).get("completed") or result["speedup"] > 1


def test_cost_is_linear(bench_dir: Path) -> None:
    sizes = sorted(m for m, r in RESULTS.items() if r["spark"]["completed"])
    if len(sizes) < 2:
        pytest.skip("needs two completed sizes")
    small, large = sizes[0], sizes[-1]
    ratio = RESULTS[large]["spark"]["median_wall_s"] / RESULTS[small]["spark"]["median_wall_s"]
    print(f"\nwall time x{ratio:.1f} for x{large / small:.0f} messages")
    if ENFORCE:
        assert ratio <= 1.5 * large / small


JSONL_SIZE = int(os.environ.get("BFH_BENCH_JSONL_SIZE", "1000000"))


def _to_jsonl(run_dir: Path) -> int:
    """Rewrite a synthetic run's staged Parquet as the agents' raw message logs (the form a real
    run has), drop the staged copy; returns the JSONL bytes."""
    import pandas as pd

    events = run_dir / "analysis" / "events.parquet"
    # nullable dtypes: an int column with nulls must stay int in JSON (1, not 1.0)
    frames = [pd.read_parquet(p, dtype_backend="numpy_nullable") for p in sorted(events.glob("*.parquet"))]
    ev = pd.concat(frames, ignore_index=True).sort_values("seq", kind="stable")
    ev = ev.drop(columns=[c for c in ("seq", "bad_reason", "raw", "file") if c in ev])
    size = 0
    for agent, grp in ev.groupby("agent", sort=True):
        path = run_dir / "agents" / str(agent) / "messages.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        # nulls are written as null: the same as an absent optional field for the parser
        grp.to_json(path, orient="records", lines=True, double_precision=15)
        size += path.stat().st_size
    shutil.rmtree(run_dir / "analysis")
    return size


def test_jsonl_conversion_vs_job(bench_dir: Path) -> None:
    """How much of a cold run is the JSONL->Parquet conversion (stage), and what reusing the
    staged Parquet saves: one cold run (stage + job) then REPEAT warm runs (job only)."""
    run_dir = bench_dir / f"jsonl-{JSONL_SIZE}"
    shutil.rmtree(run_dir, ignore_errors=True)
    truth = _generate(run_dir, JSONL_SIZE)
    jsonl_mb = _to_jsonl(run_dir) >> 20
    cold = _spark(run_dir)
    assert cold["rc"] == 0, cold["stderr"]
    _check_truth(run_dir, truth)
    timings = json.loads((run_dir / "analysis" / "summary.json").read_text())["engine"]["timings_s"]
    warm = []
    for _ in range(REPEAT):
        r = _spark(run_dir)
        assert r["rc"] == 0, r["stderr"]
        r["timings_s"] = json.loads((run_dir / "analysis" / "summary.json").read_text())["engine"][
            "timings_s"
        ]
        warm.append(r)
    result = {
        "jsonl_messages": JSONL_SIZE,
        "jsonl_mb": jsonl_mb,
        "cold_wall_s": cold["wall_s"],
        "cold_peak_rss_mb": cold["peak_rss_mb"],
        "cold_timings_s": timings,
        "stage_share": round(timings["stage"] / cold["wall_s"], 2),
        "warm": _median(warm),
        "load_avg": cold["load_avg"],
    }
    shutil.rmtree(run_dir, ignore_errors=True)
    print("\n" + json.dumps(result, indent=1))
    with (bench_dir.parent / "bfh-bench-results.jsonl").open("a") as fh:
        fh.write(json.dumps(result) + "\n")


def _pandas_main(run_dir: str) -> int:
    sys.path.insert(0, str(REPO / "tests" / "spark"))
    from pandas_reference import reconcile_pandas

    s = reconcile_pandas(Path(run_dir))
    print(json.dumps({k: s[k] for k in ("totals", "deliveries", "ghosts", "unexpected")}))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "pandas":
        sys.exit(_pandas_main(sys.argv[2]))
    print("usage: bench_reconcile.py pandas RUN_DIR", file=sys.stderr)
    sys.exit(2)
