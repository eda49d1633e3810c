"""Benchmark: reconciling a fleet run, deliveries per second once Spark is up (issue 44 item 3).

    flock /tmp/bfh-heavy.lock .venv/bin/python -m pytest benchmarks/bench_fleet_reconcile.py \\
        -m benchmark -s -p no:xdist
    BFH_FLEET_RECON_SIZES=150x1000,1000x1000 (members x controller events, the defaults)
    BFH_FLEET_RECON_REPEAT=5 BFH_FLEET_RECON_WIDE_REPEAT=1 BFH_FLEET_RECON_RUNS=/path/to/run ...

Each size is a generated fleet folder (spark_analysis/testing/fleet.py: the log contract's
JSON lines, ``faults.jsonl`` and ``run.json`` of ``bfh run fleet-masterslave --fleet N``; each
member also sends 30 status events to the controller's subscriber), plus every real run folder
in ``BFH_FLEET_RECON_RUNS`` (comma-separated). In one warm local session (a small fleet
reconciled first), per folder:

- the first reconcile, which stages the JSON lines to Parquet (what a fleet run pays once);
- ``BFH_FLEET_RECON_REPEAT`` reconciles reusing the staged Parquet: the median is the figure,
  deliveries (the summary's expected pairs) per second of it;
- ``BFH_FLEET_RECON_WIDE_REPEAT`` reconciles with the pairs stage it replaced (one wide row per
  message: spark_analysis/widepairs.py), on folders of at most
  ``BFH_FLEET_RECON_WIDE_MAX`` members (default 200; 0 runs it on none). Its summary must equal
  the new one.

Results go to stdout and are appended to ``$BFH_FLEET_RECON_DIR/../bfh-fleet-reconcile.jsonl``.
``BFH_BENCH_ENFORCE=1`` asserts the issue's 100,000 deliveries a second.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spark_analysis.aggregates import PERCENTILE_ACCURACY  # noqa: E402
from spark_analysis.inputs import load_inputs  # noqa: E402
from spark_analysis.policy import Policy  # noqa: E402
from spark_analysis.reconcile import reconcile, run_job  # noqa: E402
from spark_analysis.testing.fleet import FleetSpec, write_fleet_run  # noqa: E402
from spark_analysis.widepairs import classify_wide  # noqa: E402

SIZES = [s for s in os.environ.get("BFH_FLEET_RECON_SIZES", "150x1000,1000x1000").split(",") if s]
REPEAT = int(os.environ.get("BFH_FLEET_RECON_REPEAT", "5"))
WIDE_REPEAT = int(os.environ.get("BFH_FLEET_RECON_WIDE_REPEAT", "1"))
WIDE_MAX = int(os.environ.get("BFH_FLEET_RECON_WIDE_MAX", "200"))
RUNS = [Path(p) for p in os.environ.get("BFH_FLEET_RECON_RUNS", "").split(",") if p]
WORK = Path(os.environ.get("BFH_FLEET_RECON_DIR", "/tmp/bfh-fleet-reconcile"))
ENFORCE = os.environ.get("BFH_BENCH_ENFORCE") == "1"
TARGET = 100_000  # deliveries a second (issue 44)

pytestmark = [pytest.mark.benchmark, pytest.mark.timeout(3600)]


def _timed(fn: Any) -> tuple[float, dict[str, Any]]:
    t = time.perf_counter()
    summary = fn()
    return time.perf_counter() - t, summary


def _new(spark: Any, run_dir: Path) -> Any:
    return lambda: reconcile([run_dir], spark=spark)[0]


def _wide(spark: Any, run_dir: Path) -> Any:
    return lambda: run_job(spark, load_inputs([run_dir]), Policy(), classifier=classify_wide)[0]


def _comparable(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary less its engine, and less the latency percentiles past PERCENTILE_ACCURACY
    receipts: there they are approximate (rank error <= n/10,000) and depend on the order the rows
    reach the sketch, which differs between the plans (count, max and histogram are exact)."""
    out = {k: v for k, v in summary.items() if k != "engine"}
    lat = out.get("latency_s") or {}
    if (lat.get("count") or 0) > PERCENTILE_ACCURACY:
        out["latency_s"] = {k: v for k, v in lat.items() if k not in ("p50", "p95", "p99")}
    return out


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return _comparable(a) == _comparable(b)


def _folders() -> list[tuple[str, Path, int]]:
    """(label, run folder, members): the generated sizes, then the real runs given."""
    out = []
    for size in SIZES:
        members, events = (int(x) for x in size.split("x"))
        d = WORK / f"fleet-{members}x{events}"
        if not (d / "run.json").exists():
            shutil.rmtree(d, ignore_errors=True)
            write_fleet_run(d, FleetSpec(members=members, events=events))
        out.append((f"generated {members} members x {events} events", d, members))
    for r in RUNS:  # a copy: the benchmark removes its analysis/ between runs
        if not (r / "agents").is_dir():
            continue
        d = WORK / f"run-{r.name}"
        if not d.exists():
            shutil.copytree(r, d, ignore=shutil.ignore_patterns("analysis"))
        members = sum(1 for p in (d / "agents").iterdir() if p.name.startswith("fleet-"))
        out.append((f"run {r.name}", d, members))
    return out


def _measure(spark: Any, label: str, run_dir: Path, members: int) -> dict[str, Any]:
    shutil.rmtree(run_dir / "analysis", ignore_errors=True)
    cold, summary = _timed(_new(spark, run_dir))
    deliveries = summary["deliveries"]["expected"]
    walls, stages = [], []
    for _ in range(REPEAT):
        wall, s = _timed(_new(spark, run_dir))
        assert _same(s, summary)
        walls.append(wall)
        stages.append(s["engine"]["timings_s"])
    row: dict[str, Any] = {
        "folder": label,
        "members": members,
        "deliveries": deliveries,
        "first_with_staging_s": round(cold, 2),
        "staging_s": summary["engine"]["timings_s"].get("stage"),
        "walls_s": [round(w, 2) for w in walls],
        "median_s": round(statistics.median(walls), 2),
        "deliveries_per_s": round(deliveries / statistics.median(walls)),
        "stages_s": stages[walls.index(statistics.median(walls))] if REPEAT % 2 else stages[-1],
    }
    if WIDE_REPEAT and members <= WIDE_MAX:
        wide = []
        for _ in range(WIDE_REPEAT):
            wall, s = _timed(_wide(spark, run_dir))
            row["same_summary_as_wide"] = _same(s, summary)
            row["differing_keys"] = sorted(
                k for k in set(s) | set(summary) if k not in ("engine",) and s.get(k) != summary.get(k)
            )
            row["wide_stages_s"] = s["engine"]["timings_s"]
            wide.append(wall)
        row["wide_walls_s"] = [round(w, 2) for w in wide]
        row["wide_median_s"] = round(statistics.median(wide), 2)
    print(f"\n{label}: {json.dumps(row)}", flush=True)
    return row


def test_fleet_reconcile_rate() -> None:
    from spark_analysis.session import get_spark

    WORK.mkdir(parents=True, exist_ok=True)
    folders = _folders()
    spark = get_spark()
    warm = WORK / "warm-up"
    shutil.rmtree(warm, ignore_errors=True)
    write_fleet_run(warm, FleetSpec(members=20, events=50, status=5))
    _new(spark, warm)()
    _wide(spark, warm)()
    rows = [_measure(spark, label, d, m) for label, d, m in folders]
    with (WORK.parent / "bfh-fleet-reconcile.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"time": time.time(), "rows": rows}) + "\n")
    for r in rows:
        assert r.get("same_summary_as_wide", True), f"{r['folder']}: the summary differs from the wide path's"
        if ENFORCE:
            assert r["deliveries_per_s"] >= TARGET, r
