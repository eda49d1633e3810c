"""Merge the observer's records and every member's broker.log signatures into events.jsonl."""

from __future__ import annotations

from pathlib import Path

from harness.witness.brokerlog import parse_file
from harness.witness.events import EVENTS_FILE, OBSERVER_FILE, read_events, write_events


def collect(run_dir: str | Path) -> Path:
    """Write `RUN_DIR/brokers/events.jsonl` (sorted by ts) once the brokers have stopped.

    Members are the folders of `brokers/` holding a broker.log; a run without an observer
    (BFH_WITNESS=0, no JDK) still gets the log signatures.
    """
    brokers = Path(run_dir) / "brokers"
    records = list(read_events(brokers / OBSERVER_FILE))
    for log in sorted(brokers.glob("*/broker.log")):
        records += parse_file(log, log.parent.name)
    out = brokers / EVENTS_FILE
    write_events(out, records)
    return out
