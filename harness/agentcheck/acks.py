"""The wire rules: the message log against the acknowledgements the broker's side saw
(harness/agentcheck/tap.py), by byte offset in the log, so no clock is compared.

- C-15 (`received` before the ack): when the agent's k-th ack of message M on a subscription passed the
  tap, the log already held k `received` records of M for that subscription, one naming the
  broker that delivered it.
- C-13 (`sent` only after the ack): when the k-th `sent` of M was written, k broker acks of M had passed the
  tap before it, one from the broker it names (QoS 0 has no ack: not checked).
- C-12 (every hand-over is a `send_attempt`): no more PUBLISHes of M reached the brokers than the
  log has `send_attempt`s of M with a broker.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from harness.agentcheck.findings import Finding
from harness.agentcheck.logcheck import Context, Line


def _broker(line: Line) -> Any:
    return (line.record or {}).get("broker")


def _where(ctx: Context, line: Line | None) -> str:
    return f"{ctx.label}:{line.no}" if line is not None else ctx.label


def received_before_ack(lines: list[Line], events: list[dict[str, Any]], ctx: Context) -> list[Finding]:
    by_sub: dict[tuple[str, str], list[Line]] = defaultdict(list)
    by_msg: dict[str, list[Line]] = defaultdict(list)
    for ln in lines:
        r = ln.record
        if r and r.get("event") == "received" and isinstance(r.get("msg_id"), str):
            by_sub[(r["msg_id"], str(r.get("subscription")))].append(ln)
            by_msg[r["msg_id"]].append(ln)
    acked: Counter[tuple[str, str | None]] = Counter()
    out = []
    for e in events:
        if e.get("kind") != "delivery_acked" or not isinstance(e.get("msg_id"), str):
            continue
        m, filters = e["msg_id"], e.get("filters") or []
        sub = filters[0] if len(filters) == 1 else None  # a connection with one subscription
        acked[(m, sub)] += 1
        k = acked[(m, sub)]
        recs = by_sub[(m, sub)] if sub is not None else by_msg[m]
        written = [ln for ln in recs if ln.end <= e["log_size"]]
        if len(written) >= k:
            if not any(_broker(ln) == e["broker"] for ln in written):
                what = f"received {m} names {_broker(written[-1])}; {e['broker']} delivered it"
                out.append(Finding("C-15", what, _where(ctx, written[-1])))
            continue
        on = f" on {sub}" if sub else ""
        if len(recs) >= k:
            late = recs[k - 1]
            what = (
                f"received {m}{on} written after the agent acknowledged it to {e['broker']} "
                f"(the log held {e['log_size']} bytes at the ack; the record ends at byte {late.end})"
            )
            out.append(Finding("C-15", what, _where(ctx, late)))
        else:
            what = f"the agent acknowledged {m}{on} to {e['broker']} and never logged its `received`"
            out.append(Finding("C-15", what, _where(ctx, None)))
    return out


def sent_after_ack(lines: list[Line], events: list[dict[str, Any]], ctx: Context) -> list[Finding]:
    acks: dict[str, list[tuple[int, str]]] = defaultdict(list)  # msg_id -> (log size, broker)
    for e in events:
        if e.get("kind") == "publish_acked" and isinstance(e.get("msg_id"), str):
            acks[e["msg_id"]].append((int(e["log_size"]), str(e.get("broker"))))
    sent: Counter[str] = Counter()
    out = []
    for ln in lines:
        r = ln.record
        if not r or r.get("event") != "sent" or not isinstance(r.get("msg_id"), str) or r.get("qos") == 0:
            continue
        m = r["msg_id"]
        sent[m] += 1
        before = [b for size, b in acks[m] if size <= ln.start]
        if len(before) >= sent[m]:
            if r.get("broker") not in before:
                what = f"sent {m} names {r.get('broker')}; the ack came from {before[-1]}"
                out.append(Finding("C-13", what, _where(ctx, ln)))
            continue
        if len(acks[m]) >= sent[m]:
            what = f"sent {m} written before the broker's ack of it reached the agent"
        else:
            what = f"sent {m}: the broker acknowledged it {len(acks[m])} time(s), this is `sent` {sent[m]}"
        out.append(Finding("C-13", what, _where(ctx, ln)))
    return out


def attempts_seen(lines: list[Line], events: list[dict[str, Any]], ctx: Context) -> list[Finding]:
    """C-12: every PUBLISH of M the broker's side saw is a `send_attempt` of M with a broker (a
    re-send the client library made by itself included)."""
    seen = Counter(
        e["msg_id"] for e in events if e.get("kind") == "published" and isinstance(e.get("msg_id"), str)
    )
    logged: dict[str, list[Line]] = defaultdict(list)
    for ln in lines:
        r = ln.record
        if r and r.get("event") == "send_attempt" and r.get("broker") is not None:
            logged[str(r.get("msg_id"))].append(ln)
    out = []
    for m, n in seen.items():
        if n > len(logged[m]):
            last = logged[m][-1] if logged[m] else None
            what = f"the brokers received {m} {n} times; the log has {len(logged[m])} send_attempt(s) on one"
            out.append(Finding("C-12", what, _where(ctx, last)))
    return out


def check_wire(lines: list[Line], events: list[dict[str, Any]], ctx: Context) -> list[Finding]:
    return (
        received_before_ack(lines, events, ctx)
        + sent_after_ack(lines, events, ctx)
        + attempts_seen(lines, events, ctx)
    )
