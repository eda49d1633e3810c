"""The brokers' connections and CPU over a run, RUN_DIR/broker-usage.jsonl: its one format, writer
and reader.

The run loop samples it (harness/run/brokersampler.py, local backend); the report draws it per
broker (harness/report/brokerchart.py). One line per sample (about every second):

    {"ts": wall time of the sample,
     "brokers": {broker: {"conns": established TCP connections on its connector ports (what it
                          accepted: fault-proxy links, bridges; null: the kernel could not say),
                          "cpu": cores the broker's JVM used since the last sample (null: not
                          running, or its first sample), "rss_mb": its resident memory}}}

A broker that is down has no entry in that sample. run.json `observations.broker_usage` holds
the summary (`summarize`): per broker the peak connections and the peak and mean CPU.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from harness.contracts.jsonlines import write_atomic

USAGE_FILE = "broker-usage.jsonl"


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        return None
    return float(x)


def write(run_dir: Path, rows: list[dict[str, Any]]) -> Path:
    return write_atomic(Path(run_dir) / USAGE_FILE, rows)


def read(run_dir: Path) -> list[dict[str, Any]]:
    """The samples in time order; [] when the run has none. Lines that are not a sample with a
    finite `ts` and a `brokers` object are skipped."""
    path = Path(run_dir) / USAGE_FILE
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict) and _num(r.get("ts")) is not None and isinstance(r.get("brokers"), dict):
            rows.append(r)
    return sorted(rows, key=lambda r: float(r["ts"]))


Series = dict[str, list[tuple[float, float | None, float | None]]]


def series(rows: list[dict[str, Any]]) -> Series:
    """broker -> [(ts, connections, cpu cores)] in time order (a field None where not known)."""
    out: Series = {}
    for r in rows:
        for name, b in r["brokers"].items():
            if isinstance(b, dict):
                point = (float(r["ts"]), _num(b.get("conns")), _num(b.get("cpu")))
                out.setdefault(str(name), []).append(point)
    return out


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary run.json keeps: per broker the peak connections, peak and mean CPU (cores)."""
    brokers: dict[str, Any] = {}
    for name, pts in series(rows).items():
        conns = [c for _, c, _ in pts if c is not None]
        cpu = [u for _, _, u in pts if u is not None]
        brokers[name] = {
            "conns_max": max(conns, default=None),
            "cpu_max": round(max(cpu), 3) if cpu else None,
            "cpu_mean": round(sum(cpu) / len(cpu), 3) if cpu else None,
        }
    return {"file": USAGE_FILE, "samples": len(rows), "brokers": brokers}
