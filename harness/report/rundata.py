"""What a report reads from a reconciled run folder (RunData), and the error it raises when the
folder lacks what a report needs. Never Spark."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.contracts import runrecord
from harness.contracts.faultlog import read_windows
from harness.contracts.manifest import EvidenceError, check_kind, run_window, ts_ok
from harness.contracts.msglog import clock_offsets, iter_records
from harness.verdict.judge import read_verdict


class ReportError(RuntimeError):
    """The run folder lacks what a report needs (e.g. it was never reconciled)."""


@dataclass
class RunData:
    run_dir: Path
    summary: dict[str, Any]
    run: dict[str, Any]
    faults: list[dict[str, Any]]  # one per fault_id: fault, target, start, end, params
    agents: dict[str, list[dict[str, Any]]]
    messages: list[dict[str, Any]] = field(default_factory=list)  # rows of messages.parquet (few columns)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{path} is missing (was the run reconciled? `bfh reconcile RUN_DIR`)") from None
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}: not JSON ({e})") from None
    return data if isinstance(data, dict) else {}


def load_run(run_dir: Path) -> RunData:
    run_dir = Path(run_dir).resolve()
    if not run_dir.is_dir():
        raise ReportError(f"{run_dir}: no such run folder")
    try:  # regular files only: a FIFO in a log's place would block the report
        for rel in ("analysis/summary.json", "run.json", "faults.jsonl"):
            check_kind(run_dir / rel)
        logs = sorted((run_dir / "agents").glob("*/messages.jsonl"))
        for log in logs:
            check_kind(log, "a message log")
    except EvidenceError as e:
        raise ReportError(str(e)) from None
    summary = {**_read_json(run_dir / "analysis" / "summary.json"), **read_verdict(run_dir)}  # + the judge's
    try:  # run.json through its owner (harness.contracts.runrecord); absent: no record
        run = runrecord.read(run_dir) or {}
    except runrecord.RunRecordError as e:
        raise ReportError(str(e)) from None
    # Only times inside the run's window are drawn (a ts in milliseconds, NaN or inf is a
    # malformed record, counted by the verdict's `evidence` check, not a chart gigabytes wide).
    window = run_window(run)
    windows = [
        {"fault_id": w.fault_id, "fault": w.fault, "target": w.target, "start": w.start, "params": w.params}
        | ({"end": w.end} if ts_ok(w.end, window) else {})
        for w in read_windows(run_dir / "faults.jsonl").windows
        if ts_ok(w.start, window)
    ]
    offsets = clock_offsets(run)  # an agent on another host's clock (--backend swarm)
    agents = {
        log.parent.name: [
            r
            for r in iter_records(log, offset_s=offsets.get(log.parent.name, 0.0))
            if ts_ok(r.get("ts"), window)
        ]
        for log in logs
    }
    messages: list[dict[str, Any]] = []
    parquet = run_dir / "analysis" / "messages.parquet"
    if parquet.exists():
        import pyarrow.parquet as pq

        cols = ["msg_id", "publisher", "state", "first_attempt_ts", "status", "msg_row"]
        messages = pq.read_table(parquet, columns=cols).to_pylist()
    return RunData(run_dir, summary, run, windows, agents, messages)


def blame_rows(run_dir: Path) -> dict[str, dict[str, Any]]:
    """msg_id -> its first anomalous delivery's blame row (analysis/blame.parquet, harness.verdict)."""
    from harness.verdict import blame

    out: dict[str, dict[str, Any]] = {}
    for r in blame.read(run_dir, columns=["msg_id", "status", "blame", "evidence"]):
        out.setdefault(str(r["msg_id"]), r)
    return out
