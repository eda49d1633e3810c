"""Signatures in a broker's own log (`brokers/<member>/broker.log`, log4j layout
`%d{ISO8601} | %-5p | %m | %c | %t`), as broker event records (source "log").

Patterns are written from lines ActiveMQ 5.17.2 printed in this harness's runs (see
tests/harness/test_witness.py). Timestamps are the broker's local wall clock on this machine,
converted to epoch seconds in the harness's local time zone.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from harness.witness import events as ev

LINE = re.compile(
    r"^(?P<date>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(?P<ms>\d{3}) \| (?P<level>\w+)\s*\| (?P<rest>.*)$"
)
MAX_LINE = 500

# (event, pattern on the message); the named groups become fields of the record.
SIGNATURES: list[tuple[str, re.Pattern[str]]] = [
    (
        ev.LINK_STOLEN,
        re.compile(r"Stealing link for clientId (?P<client_id>\S+) From Connection (?P<victim>.*)"),
    ),
    (
        ev.LOCK_WAITING,
        re.compile(r"Database (?P<lock>\S+) is locked by another server\. This broker is now in slave mode"),
    ),
    (
        ev.BROKER_STARTED,
        re.compile(r"Apache ActiveMQ (?P<version>\S+) \((?P<name>[^,]+), (?P<broker_id>[^)]*)\) started"),
    ),
    (
        ev.BRIDGE_ESTABLISHED,
        re.compile(
            r"Network connection between (?P<local>\S+) and (?P<remote>\S+) "
            r"\((?P<remote_broker>[^)]+)\) has been established"
        ),
    ),
    (
        ev.BRIDGE_FAILED,
        re.compile(
            r"Network connection between (?P<local>\S+) and (?P<remote>\S+) "
            r"shutdown due to a remote error: (?P<error>.*)"
        ),
    ),
    (
        ev.BRIDGE_FAILED,
        re.compile(r"Failed to connect to \[(?P<remote>[^\]]*)\] after: (?P<attempts>\d+) attempt"),
    ),
    (ev.BRIDGE_STOPPED, re.compile(r"(?P<local_broker>\S+) bridge to (?P<remote_broker>\S+) stopped")),
    (ev.TRANSPORT_ERROR, re.compile(r"Transport \((?P<remote>[^)]+)\) failed(?:, (?P<error>.*))?")),
    (ev.TRANSPORT_ERROR, re.compile(r"Transport Connection to: (?P<remote>\S+) failed: (?P<error>.*)")),
]
# The store lock is taken inside the persistence adapter's start: right after "Using Persistence
# Adapter" (no wait), or at the first line after the slave-mode line (the wait ended).
ADAPTER = re.compile(r"Using Persistence Adapter: ")


def _epoch(date: str, ms: str) -> float:
    return time.mktime(time.strptime(date, "%Y-%m-%d %H:%M:%S")) + int(ms) / 1000.0


def line_ts(line: str) -> float | None:
    """The epoch time a broker.log line was written (None for a continuation line)."""
    m = LINE.match(line)
    return _epoch(m["date"], m["ms"]) if m else None


def _message(rest: str) -> str:
    """The %m part: the last two ' | ' fields are the logger and the thread."""
    parts = rest.split(" | ")
    return " | ".join(parts[:-2]) if len(parts) >= 3 else rest


def parse_lines(lines: Iterable[str], broker: str) -> Iterator[dict[str, Any]]:
    """Broker event records from log lines (stack traces and unknown lines are skipped)."""
    lock_pending = False
    waited_since: float | None = None
    for raw in lines:
        m = LINE.match(raw.rstrip("\n"))
        if not m:
            continue
        ts = _epoch(m["date"], m["ms"])
        msg = _message(m["rest"])
        base = {"ts": ts, "event": "", "broker": broker, "source": "log", "line": raw.strip()[:MAX_LINE]}
        if ADAPTER.search(msg):
            lock_pending, waited_since = True, None
            continue
        matched = False
        for event, pat in SIGNATURES:
            sm = pat.search(msg)
            if sm:
                matched = True
                if event == ev.LOCK_WAITING:
                    waited_since = ts
                elif lock_pending:  # the lock was taken before this line
                    yield _acquired(base, waited_since)
                    lock_pending = False
                fields = {k: v for k, v in sm.groupdict().items() if v is not None}
                yield {**base, "event": event, **fields}
                break
        if not matched and lock_pending:
            yield _acquired(base, waited_since)
            lock_pending = False


def _acquired(base: dict[str, Any], waited_since: float | None) -> dict[str, Any]:
    rec = {**base, "event": ev.LOCK_ACQUIRED}
    if waited_since is not None:
        rec["waited_since"] = waited_since
    return rec


def parse_file(path: str | Path, broker: str) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.exists():
        return []
    with path.open(encoding="utf-8", errors="replace") as f:
        return list(parse_lines(f, broker))
