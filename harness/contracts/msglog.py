"""The message-log contract (docs/contracts.md): one writer and one tolerant reader.

Writers flush each record so a kill -9 of the writer loses at most the record being written.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

#: the contract's event names (docs/contracts.md); spark_analysis/ingest.py reads them from here
PUBLISHER_EVENTS = ("send_attempt", "sent", "dropped")
MESSAGE_EVENTS = (*PUBLISHER_EVENTS, "received")  # the events that carry a msg_id
EVENTS = ("subscribed", "connected", "disconnected", *MESSAGE_EVENTS)


class MessageLogWriter:
    """Thread-safe JSON Lines writer stamping `ts`, `run`, `agent` on every record."""

    def __init__(self, path: str | Path, run: str, agent: str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._run = run
        self._agent = agent
        self._lock = threading.Lock()
        self._file: TextIO | None = self.path.open("a", encoding="utf-8")

    def write(self, event: str, **fields: Any) -> None:
        record = {"ts": time.time(), "run": self._run, "agent": self._agent, "event": event, **fields}
        line = json.dumps(record, separators=(",", ":")) + "\n"
        with self._lock:
            if self._file is None:
                return
            self._file.write(line)
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> MessageLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: run.json's per-agent clock offsets (an agent on another host's clock: `--backend swarm`):
#: {agent: {"offset_s": seconds to add to its ts to read the harness host's clock, ...}}
CLOCKS_KEY = "clocks"


def clock_offsets(run: Mapping[str, Any] | None) -> dict[str, float]:
    """Each agent's offset from a run record (run.json as read): the readers add it to the agent's
    `ts`. Agents without one share the harness host's clock (offset 0, left out)."""
    clocks = (run or {}).get(CLOCKS_KEY)
    out: dict[str, float] = {}
    for agent, c in clocks.items() if isinstance(clocks, Mapping) else ():
        off = c.get("offset_s") if isinstance(c, Mapping) else None
        if isinstance(off, int | float) and not isinstance(off, bool) and math.isfinite(off) and off:
            out[str(agent)] = float(off)
    return out


def read_clock_offsets(run_dir: str | Path) -> dict[str, float]:
    """`clock_offsets` of RUN_DIR/run.json ({} when absent or unreadable): for readers that may not
    use the run record's owner (spark_analysis)."""
    try:
        run = json.loads((Path(run_dir) / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return clock_offsets(run if isinstance(run, dict) else None)


def shift(record: dict[str, Any], offset_s: float) -> dict[str, Any]:
    """The record on the harness host's clock (a numeric `ts` plus the agent's offset)."""
    ts = record.get("ts")
    if offset_s and isinstance(ts, int | float) and not isinstance(ts, bool):
        record["ts"] = ts + offset_s
    return record


def iter_records(
    path: str | Path, malformed: list[str] | None = None, offset_s: float = 0.0
) -> Iterator[dict[str, Any]]:
    """Yield the JSON objects of a JSON Lines file, skipping torn or malformed lines.

    Skipped lines are appended to `malformed` when given, so callers can count and show them.
    `offset_s`: the agent's clock offset (`clock_offsets`), added to every record's `ts`.
    """
    with Path(path).open(encoding="utf-8", errors="replace") as f:
        for line in f:
            text = line.strip()
            if not text:
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError:
                if malformed is not None:
                    malformed.append(text[:200])
                continue
            if isinstance(record, dict):
                yield shift(record, offset_s)
            elif malformed is not None:
                malformed.append(text[:200])


class LogFollower:
    """Incrementally reads a growing JSON Lines file (a partial last line waits for its end)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._offset = 0
        self._partial = b""

    def new_records(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()  # b"" when the chunk ended with a newline
        out = []
        for line in lines:
            try:
                rec = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(rec, dict):
                out.append(rec)
        return out
