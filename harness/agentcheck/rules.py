"""The agent contract's rules as data: one record per rule of docs/agent-contract.md that
`bfh agent check` applies.

Each rule has the id the document states it under (a line starting `**C-15**`; the check finds it
at run time, so the line it cites follows the document's edits), the rule in one line, and what
it is checked against: `log` (the message log alone, harness/agentcheck/logcheck.py), `wire` (the
log against the acks the broker's side saw: tap.py, acks.py) or `process` (the agent's exit:
process.py). The record shapes the check reads are here too (`FIELDS`). This module imports
nothing of the harness.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    id: str  # as docs/agent-contract.md states it
    text: str  # the rule in one line
    against: str  # log | wire | process


_ALL = (
    Rule("C-2", "malformed agent.conf or workload.json: exit non-zero with one line on stderr", "process"),
    Rule("C-5", "never echo mb.password: not on stdout/stderr, not in the log", "process"),
    Rule("C-6", "one JSON object per line, written whole and flushed; ts (float), run, agent, event", "log"),
    Rule(
        "C-7", "role is `publisher` or `subscriber:<filter>` (the workload's); one connection per role", "log"
    ),
    Rule(
        "C-8", "`connected` after each handshake: broker as in mb.urls, role, reason initial/reconnect", "log"
    ),
    Rule(
        "C-9",
        "`disconnected` ends each connection; a failed attempt's reason starts `connect_failed:`",
        "log",
    ),
    Rule("C-10", "`subscribed`: topic (a workload filter), broker, qos, durable", "log"),
    Rule(
        "C-12",
        "`send_attempt`: msg_id, topic, broker (null: reason no_broker), attempt 1, 2, ..., qos",
        "log",
    ),
    Rule("C-13", "`sent` only after the broker's ack; attempts = the message's send_attempts", "wire"),
    Rule("C-14", "`dropped`: msg_id, topic, reason, attempts = the message's send_attempts", "log"),
    Rule("C-15", "`received` for every delivery, written and flushed before the ack", "wire"),
    Rule("C-17", "subscribe first: every subscription `subscribed` before the first `send_attempt`", "log"),
    Rule(
        "C-21",
        "on SIGTERM: `disconnected` (shutdown) for each open connection, exit 0 within 10 s",
        "process",
    ),
)
RULES: dict[str, Rule] = {r.id: r for r in _ALL}
#: the rule that states each event's record (its fields and their types)
EVENT_RULE = {
    "connected": "C-8",
    "disconnected": "C-9",
    "subscribed": "C-10",
    "send_attempt": "C-12",
    "sent": "C-13",
    "dropped": "C-14",
    "received": "C-15",
}
#: on SIGTERM, each open connection's `disconnected` reason (C-9, C-21)
SHUTDOWN = "shutdown"
NO_BROKER = "no_broker"

#: the contract's events and each one's required fields: name -> accepted JSON types
#: ("str", "int", "float", "bool", "null"); harness/contracts/msglog.py EVENTS names the events
_NUM = ("int", "float")
FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "connected": {"broker": ("str",), "role": ("str",), "reason": ("str",)},
    "disconnected": {"broker": ("str",), "role": ("str",), "reason": ("str",)},
    "subscribed": {"topic": ("str",), "broker": ("str",), "qos": ("int",), "durable": ("bool",)},
    "send_attempt": {
        "msg_id": ("str",),
        "topic": ("str",),
        "broker": ("str", "null"),
        "attempt": ("int",),
        "qos": ("int",),
    },
    "sent": {
        "msg_id": ("str",),
        "topic": ("str",),
        "broker": ("str",),
        "attempts": ("int",),
        "qos": ("int",),
    },
    "dropped": {"msg_id": ("str",), "topic": ("str",), "reason": ("str",), "attempts": ("int",)},
    "received": {"msg_id": ("str", "null"), "topic": ("str",), "broker": ("str",), "subscription": ("str",)},
}
COMMON: dict[str, tuple[str, ...]] = {"ts": _NUM, "run": ("str",), "agent": ("str",), "event": ("str",)}
#: a failed connect attempt's reason starts with this (bounded_retry and the connection windows read it)
CONNECT_FAILED = "connect_failed:"
#: connected.reason: a role's first connection, then every later one
CONNECTED_INITIAL = "initial"
CONNECTED_AGAIN = "reconnect"
PUBLISHER_ROLE = "publisher"
SUBSCRIBER_ROLE = "subscriber:"


def type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    return type(value).__name__
