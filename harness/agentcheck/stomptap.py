"""The STOMP side of the wire tap (harness/agentcheck/tap.py): frames parsed as they pass.

A SEND with a `receipt` is acknowledged by the broker's RECEIPT; a MESSAGE of a
`client-individual` subscription by the agent's ACK (`id`, STOMP 1.2, or `message-id`, 1.1).
Auto-ack subscriptions have no ack to observe.
"""

from __future__ import annotations

import json
from collections.abc import Callable

Note = Callable[..., None]


def mqtt_filter(destination: str) -> str:
    """`/topic/a.*.>` -> `a/+/#` (the workload's filter; docs/agent-contract.md's mapping back)."""
    name = destination.removeprefix("/topic/")
    return "/".join({"*": "+", ">": "#"}.get(p, p) for p in name.split("."))


def frames(buf: bytearray, data: bytes) -> list[tuple[str, dict[str, str], bytes]]:
    """Complete frames (command, headers, body) from `buf` + `data`; the rest stays in `buf`."""
    buf += data
    out: list[tuple[str, dict[str, str], bytes]] = []
    while True:
        while buf[:1] in (b"\n", b"\r"):  # heart-beats
            del buf[:1]
        head_end = buf.find(b"\n\n")
        if head_end < 0:
            return out
        lines = bytes(buf[:head_end]).decode("utf-8", "replace").replace("\r", "").split("\n")
        headers: dict[str, str] = {}
        for h in lines[1:]:
            k, _, v = h.partition(":")
            headers.setdefault(k, v)  # the first of a repeated header wins (STOMP 1.2)
        start = head_end + 2
        length = headers.get("content-length", "")
        end = start + int(length) if length.isdigit() else buf.find(b"\0", start)
        if end < 0 or len(buf) <= end:
            return out
        out.append((lines[0], headers, bytes(buf[start:end])))
        del buf[: end + 1]


def _msg_id(body: bytes) -> str | None:
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    m = obj.get("msg_id") if isinstance(obj, dict) else None
    return m if isinstance(m, str) else None


class StompConn:
    """One relayed STOMP connection; `note(kind, **fields)` records what passed, `log_size()` the
    agent's log size at that instant."""

    def __init__(self, note: Note, log_size: Callable[[], int]) -> None:
        self.note, self.log_size = note, log_size
        self.subs: dict[str, str] = {}  # subscription id -> the workload's filter
        self.delivered: dict[str, tuple[str | None, str | None]] = {}  # ack id -> msg_id, sub id
        self.published: dict[str, str | None] = {}  # receipt -> msg_id
        self._in, self._out = bytearray(), bytearray()

    def from_agent(self, data: bytes) -> None:
        for cmd, h, body in frames(self._out, data):
            if cmd == "SEND":
                msg_id = _msg_id(body)
                self.note("published", msg_id=msg_id)
                if "receipt" in h:
                    self.published[h["receipt"]] = msg_id
            elif cmd == "ACK":
                key = h.get("id") or h.get("message-id", "")
                if key in self.delivered:
                    msg_id, sub = self.delivered.pop(key)
                    filters = [self.subs[sub]] if sub in self.subs else []
                    self.note("delivery_acked", msg_id=msg_id, filters=filters, log_size=self.log_size())
            elif cmd == "SUBSCRIBE":
                self.subs[h.get("id", "")] = mqtt_filter(h.get("destination", ""))
            elif cmd in ("CONNECT", "STOMP"):
                self.note("connect", client_id=h.get("client-id", ""))

    def from_broker(self, data: bytes) -> None:
        for cmd, h, body in frames(self._in, data):
            if cmd == "MESSAGE" and (h.get("ack") or h.get("message-id")):
                self.delivered[h.get("ack") or h["message-id"]] = (_msg_id(body), h.get("subscription"))
            elif cmd == "RECEIPT" and h.get("receipt-id") in self.published:
                msg_id = self.published.pop(h["receipt-id"])
                self.note("publish_acked", msg_id=msg_id, log_size=self.log_size())
