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

from pathlib import Path
from typing import Any

from harness.contracts.jsonlines import num, read_samples, write_atomic

USAGE_FILE = "broker-usage.jsonl"


def write(run_dir: Path, rows: list[dict[str, Any]]) -> Path:
    return write_atomic(Path(run_dir) / USAGE_FILE, rows)


def read(run_dir: Path) -> list[dict[str, Any]]:
    """The samples in time order; [] when the run has none. Lines that are not a sample with a
    finite `ts` and a `brokers` object are skipped."""
    return read_samples(Path(run_dir) / USAGE_FILE, lambda r: isinstance(r.get("brokers"), dict))


Series = dict[str, list[tuple[float, float | None, float | None]]]


def series(rows: list[dict[str, Any]]) -> Series:
    """broker -> [(ts, connections, cpu cores)] in time order (a field None where not known)."""
    out: Series = {}
    for r in rows:
        for name, b in r["brokers"].items():
            if isinstance(b, dict):
                point = (float(r["ts"]), num(b.get("conns")), num(b.get("cpu")))
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
