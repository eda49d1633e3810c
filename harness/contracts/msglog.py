"""The message-log contract (docs/contracts.md): one writer and one tolerant reader.

Writers flush each record so a kill -9 of the writer loses at most the record being written.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
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


def iter_records(path: str | Path, malformed: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """Yield the JSON objects of a JSON Lines file, skipping torn or malformed lines.

    Skipped lines are appended to `malformed` when given, so callers can count and show them.
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
                yield record
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
