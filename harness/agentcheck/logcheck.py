"""The record rules of the agent contract over one message log (pure: no run, no broker).

`read_lines()` keeps every line's number and byte span (the wire rules compare them with what the
broker saw, harness/agentcheck/acks.py); `check_log()` walks the records once, in file order,
following each role's connection, and returns one Finding per deviation, naming the line.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.agentcheck import rules as R
from harness.agentcheck.findings import Finding


@dataclass(frozen=True)
class Line:
    no: int  # 1-based
    start: int  # byte offset of the line
    end: int  # byte offset just past its newline
    record: dict[str, Any] | None  # None: not a JSON object
    torn: bool = False  # the last line, without its newline


@dataclass(frozen=True)
class Context:
    """What the run gave the agent: the log's expected run and agent, mb.urls, the filters."""

    run: str
    agent: str
    urls: tuple[str, ...]
    filters: tuple[str, ...]
    label: str = "messages.jsonl"  # how findings name the file
    window: tuple[float, float] | None = None  # launched - 60 s, stopped + 60 s
    stopped_ts: float | None = None  # when SIGTERM was sent


def read_lines(path: str | Path) -> list[Line]:
    data = Path(path).read_bytes() if Path(path).exists() else b""
    out: list[Line] = []
    pos = 0
    for no, raw in enumerate(data.splitlines(keepends=True), 1):
        end = pos + len(raw)
        text = raw.strip()
        if text:
            try:
                rec = json.loads(text)
            except (json.JSONDecodeError, UnicodeDecodeError):
                rec = None
            out.append(Line(no, pos, end, rec if isinstance(rec, dict) else None, not raw.endswith(b"\n")))
        pos = end
    return out


@dataclass
class _Conn:
    broker: str
    line: int


@dataclass
class _Walk:
    ctx: Context
    out: list[Finding] = field(default_factory=list)
    open: dict[str, _Conn] = field(default_factory=dict)  # role -> its open connection
    connections: Counter[str] = field(default_factory=Counter)  # role -> connected records
    attempts: Counter[str] = field(default_factory=Counter)  # msg_id -> send_attempts so far
    #: role -> the brokers its records named while it had no open connection (since the last close)
    recent: dict[str, list[str]] = field(default_factory=dict)
    subscribed: set[str] = field(default_factory=set)  # filters with a `subscribed` so far
    publishing: bool = False  # a send_attempt was logged

    def add(self, rule: str, line: Line | None, what: str) -> None:
        where = f"{self.ctx.label}:{line.no}" if line is not None else self.ctx.label
        self.out.append(Finding(rule, what, where))

    # -- one record ----------------------------------------------------------------------------
    def record(self, line: Line) -> None:
        rec = line.record
        if rec is None:
            what = "a torn last line" if line.torn else "not a JSON object"
            self.add("C-6", line, what)
            return
        if line.torn:
            self.add("C-6", line, "the last line has no newline: the record was not written whole")
        if not self.common(line, rec):
            return
        event = rec["event"]
        if event not in R.FIELDS:
            self.add("C-6", line, f"unknown event {event!r}; the contract's: {', '.join(R.FIELDS)}")
            return
        if not self.fields(line, rec, event):
            return
        broker = rec.get("broker")
        if isinstance(broker, str) and self.ctx.urls and broker not in self.ctx.urls:
            self.add("C-8", line, f"broker {broker!r} is not in mb.urls ({', '.join(self.ctx.urls)})")
        getattr(self, f"on_{event}")(line, rec)

    def common(self, line: Line, rec: dict[str, Any]) -> bool:
        bad = _bad_types(rec, R.COMMON)
        if bad:
            self.add("C-6", line, bad)
            return False
        ts = float(rec["ts"])
        win = self.ctx.window
        if not math.isfinite(ts) or (win is not None and not win[0] <= ts <= win[1]):
            self.add("C-6", line, f"ts {ts!r} is not this run's Unix time in seconds")
        if rec["run"] != self.ctx.run:
            self.add("C-6", line, f"run {rec['run']!r}, the workload's is {self.ctx.run!r}")
        if rec["agent"] != self.ctx.agent:
            self.add("C-6", line, f"agent {rec['agent']!r}, the workload's is {self.ctx.agent!r}")
        return True

    def fields(self, line: Line, rec: dict[str, Any], event: str) -> bool:
        bad = _bad_types(rec, R.FIELDS[event])
        if bad:
            self.add(R.EVENT_RULE[event], line, f"{event}: {bad}")
        return not bad

    def role_ok(self, line: Line, role: str) -> bool:
        if role == R.PUBLISHER_ROLE:
            return True
        if role.startswith(R.SUBSCRIBER_ROLE) and role.removeprefix(R.SUBSCRIBER_ROLE) in self.ctx.filters:
            return True
        self.add("C-7", line, f"role {role!r}; the workload's: publisher, " + _subs(self.ctx.filters))
        return False

    # -- connections ---------------------------------------------------------------------------
    def on_connected(self, line: Line, rec: dict[str, Any]) -> None:
        role, broker = rec["role"], rec["broker"]
        if not self.role_ok(line, role):
            return
        was = self.open.get(role)
        if was is not None:
            self.add(
                "C-9",
                line,
                f"{role} connected to {broker} while its connection to {was.broker} (line {was.line}) "
                "was open: its `disconnected` is missing",
            )
        want = R.CONNECTED_INITIAL if self.connections[role] == 0 else R.CONNECTED_AGAIN
        if rec["reason"] != want:
            nth = "first" if want == R.CONNECTED_INITIAL else "a later"
            self.add(
                "C-8",
                line,
                f"{role}'s {nth} connection has reason {rec['reason']!r}, not {want!r}",
            )
        self.connections[role] += 1
        self.open[role] = _Conn(broker, line.no)

    def on_disconnected(self, line: Line, rec: dict[str, Any]) -> None:
        role, broker, reason = rec["role"], rec["broker"], rec["reason"]
        if not self.role_ok(line, role):
            return
        conn = self.open.get(role)
        failed = reason.startswith(R.CONNECT_FAILED)
        if conn is not None and conn.broker == broker and not failed:
            del self.open[role]
            stop = self.ctx.stopped_ts
            if stop is not None and float(rec["ts"]) >= stop and reason != R.SHUTDOWN:
                what = (
                    f"{role} closed its connection after SIGTERM with reason {reason!r}, not {R.SHUTDOWN!r}"
                )
                self.add("C-21", line, what)
            return
        if failed:
            if conn is not None:
                self.add(
                    "C-9",
                    line,
                    f"a failed attempt of {role} while its connection to {conn.broker} (line {conn.line}) "
                    "is open: that connection's `disconnected` is missing",
                )
            return
        if conn is not None:  # closes a connection to another broker than the open one
            self.add(
                "C-7",
                line,
                f"{role} disconnected from {broker}, but its open connection is to {conn.broker} "
                f"(line {conn.line})",
            )
            return
        self.unopened_close(line, role, broker, reason)

    def unopened_close(self, line: Line, role: str, broker: str, reason: str) -> None:
        """A close with no open connection: a dropped `connected` when the role's records named
        that broker since its last close, else a failed attempt without its prefix."""
        if broker in self.recent.get(role, []):
            del self.recent[role]
            self.add("C-8", line, f"{role} closed a connection to {broker} that no `connected` opened")
        else:
            self.add(
                "C-9",
                line,
                f"{role}: a failed attempt on {broker} (no connection was open) with reason {reason!r}; "
                f"it must start with {R.CONNECT_FAILED!r}",
            )

    def on_connection(self, line: Line, role: str, broker: str, event: str) -> None:
        conn = self.open.get(role)
        if conn is None:
            self.recent.setdefault(role, []).append(broker)
            if len(self.recent[role]) == 1:
                self.add(
                    "C-8",
                    line,
                    f"{event} on {broker} while {role} has no open connection: its `connected` is "
                    "missing (or the record was written after the close)",
                )
        elif conn.broker != broker:
            self.add(
                "C-7",
                line,
                f"{event} names {broker}; {role}'s open connection is to {conn.broker} (line {conn.line})",
            )

    # -- subscriptions and messages ------------------------------------------------------------
    def on_subscribed(self, line: Line, rec: dict[str, Any]) -> None:
        if rec["topic"] not in self.ctx.filters:
            self.add(
                "C-10",
                line,
                f"subscribed to {rec['topic']!r}; the workload's: {_subs(self.ctx.filters)}",
            )
            return
        # A `subscribed` with no live connection under it is a claim the client made too early:
        # the verdict's subscription_confirmed promise (a behaviour finding), not a log error.
        self.subscribed.add(rec["topic"])

    def on_received(self, line: Line, rec: dict[str, Any]) -> None:
        sub = rec["subscription"]
        if sub not in self.ctx.filters:
            self.add("C-15", line, f"subscription {sub!r}; the workload's: {_subs(self.ctx.filters)}")
            return
        self.on_connection(line, R.SUBSCRIBER_ROLE + sub, rec["broker"], "received")

    def on_send_attempt(self, line: Line, rec: dict[str, Any]) -> None:
        m = rec["msg_id"]
        self.attempts[m] += 1
        if not self.publishing:
            self.publishing = True
            missing = [f for f in self.ctx.filters if f not in self.subscribed]
            if missing:
                what = f"the first send_attempt comes before `subscribed` of {', '.join(missing)}"
                self.add("C-17", line, what)
        if rec["broker"] is None and rec.get("reason") != R.NO_BROKER:
            self.add("C-12", line, f"{m}: broker null with reason {rec.get('reason')!r}, not {R.NO_BROKER!r}")
        if rec["attempt"] != self.attempts[m]:
            self.add(
                "C-12",
                line,
                f"{m}: attempt {rec['attempt']}, its send_attempt number {self.attempts[m]}",
            )
        if rec["broker"] is not None:
            self.on_connection(line, R.PUBLISHER_ROLE, rec["broker"], "send_attempt")

    def on_sent(self, line: Line, rec: dict[str, Any]) -> None:
        self.terminal(line, rec, "sent")
        self.on_connection(line, R.PUBLISHER_ROLE, rec["broker"], "sent")

    def on_dropped(self, line: Line, rec: dict[str, Any]) -> None:
        self.terminal(line, rec, "dropped")

    def terminal(self, line: Line, rec: dict[str, Any], event: str) -> None:
        m, n = rec["msg_id"], self.attempts[rec["msg_id"]]
        if rec["attempts"] != n:
            had = f"{n} send_attempt records" if n else "no send_attempt record"
            self.add(
                R.EVENT_RULE[event],
                line,
                f"{m}: {event} with attempts {rec['attempts']}, the log has {had} for it",
            )


def _bad_types(rec: dict[str, Any], spec: dict[str, tuple[str, ...]]) -> str:
    """'' when every field is there with an accepted type, else what is wrong (one line)."""
    out = []
    for name, types in spec.items():
        if name not in rec:
            out.append(f"{name} missing")
        elif (t := R.type_name(rec[name])) not in types:
            out.append(f"{name} is {t}, not {' or '.join(types)}")
    return "; ".join(out)


def _subs(filters: tuple[str, ...]) -> str:
    return ", ".join(f"subscriber:{f}" for f in filters) or "(none)"


def check_log(lines: list[Line], ctx: Context, sigterm: bool = False) -> list[Finding]:
    """Every record rule over one log, in file order; `sigterm`: the agent was stopped by SIGTERM,
    so every connection still open at the end of the log lacks its `disconnected`."""
    walk = _Walk(ctx)
    for line in lines:
        walk.record(line)
    if sigterm:
        by_no = {ln.no: ln for ln in lines}
        for role, conn in sorted(walk.open.items()):
            walk.add(
                "C-21",
                by_no.get(conn.line),
                f"{role}'s connection to {conn.broker} has no `disconnected`: open when the agent exited",
            )
    return walk.out
