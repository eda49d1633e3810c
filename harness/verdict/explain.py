"""`bfh explain RUN_DIR MSG_ID`: one message's journey, hop by hop, from the three accounts.

The publisher's records (send_attempt, sent, dropped), the broker's account (arrived on each
member, dispatched to which consumer, acked, forwarded over a bridge, expired, dead-lettered) and
the subscribers' receipts, in time order, then each anomalous delivery's blame with its records
(analysis/blame.parquet, written by the judge).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.verdict import blame as blaming
from harness.verdict import fromaccount
from harness.verdict.view import RunView, VerdictError


@dataclass
class Step:
    ts: float
    who: str  # "publisher agent-1", "broker pair-1", "subscriber agent-1"
    what: str
    record: dict[str, Any] = field(default_factory=dict)


@dataclass
class Journey:
    run_dir: Path
    msg_id: str
    steps: list[Step]
    blamed: list[dict[str, Any]]
    account: bool  # the run folder has the broker's account

    def to_dict(self) -> dict[str, Any]:
        t0 = self.steps[0].ts if self.steps else 0.0
        return {
            "run_dir": str(self.run_dir),
            "msg_id": self.msg_id,
            "account": self.account,
            "steps": [
                {
                    "ts": round(s.ts, 3),
                    "dt": round(s.ts - t0, 3),
                    "who": s.who,
                    "what": s.what,
                    "record": s.record,
                }
                for s in self.steps
            ],
            "blame": self.blamed,
        }

    def lines(self) -> list[str]:
        t0 = self.steps[0].ts if self.steps else 0.0
        out = [f"{self.msg_id} in {self.run_dir.name}" + ("" if self.account else " (no broker account)")]
        out += [f"  +{s.ts - t0:8.3f}s  {s.who:<24} {s.what}" for s in self.steps]
        for b in self.blamed:
            race = f", race {b['race']}" if b.get("race") else ""
            out.append(
                f"  {b['status']} for {b['subscriber']} on {b['subscription']}: blamed on {b['blame']}{race}"
            )
            out += [f"      {e}" for e in b.get("evidence") or []]
        return out


def _agent_step(agent: str, r: dict[str, Any]) -> Step:
    ev = str(r.get("event"))
    role = "subscriber" if ev == "received" else "publisher"
    extra = {
        k: r[k] for k in ("broker", "attempt", "reason", "subscription", "topic") if r.get(k) is not None
    }
    what = ev + (" " + " ".join(f"{k}={v}" for k, v in extra.items()) if extra else "")
    return Step(float(r["ts"]), f"{role} {agent}", what, r)


def _broker_step(r: dict[str, Any]) -> Step:
    ev = str(r.get("event"))
    c = r.get("consumer") or {}
    if ev == "dispatched":
        kind = "bridge" if c.get("network") else ("durable" if c.get("durable") else "non-durable")
        what = f"dispatched to {c.get('client_id')} ({kind} {c.get('dest')})"
        if r.get("redelivery"):
            what += f", redelivery {r['redelivery']}"
    elif ev == "acked":
        what = f"acked by {c.get('client_id')}"
    elif ev == "arrived":
        src = (
            f" over a bridge from {r.get('via_broker') or r.get('via')}"
            if r.get("via")
            else f" from {r.get('client_id')}"
        )
        what = f"arrived on {r.get('dest')}{src}"
    else:
        what = f"{ev} {r.get('cause') or ''}".strip()
    return Step(float(r["ts"]), f"broker {r.get('broker')}", what, r)


def explain(run_dir: Path, msg_id: str) -> Journey:
    """The journey of `msg_id`; VerdictError when the run folder cannot be read or never saw it."""
    v = RunView.load(Path(run_dir))
    steps = [
        _agent_step(agent, r)
        for agent, recs in v.records.items()
        for r in recs
        if str(r.get("msg_id")) == msg_id
        and r.get("event") in ("send_attempt", "sent", "dropped", "received")
    ]
    acc = fromaccount.load(v, {msg_id})
    if acc is not None:
        steps += [_broker_step(r) for r in acc.journey(msg_id)]
    if not steps:
        raise VerdictError(
            f"{v.run_dir}: no record of msg_id {msg_id!r} (neither the agents' logs nor the broker's)"
        )
    steps.sort(key=lambda s: s.ts)
    cols = ["msg_id", "subscriber", "subscription", "status", "blame", "evidence", "race", "hop"]
    try:
        rows = [b for b in blaming.read(v.run_dir, cols) if b.get("msg_id") == msg_id]
    except Exception:  # noqa: BLE001 - a folder judged before the race/hop columns: read what it has
        rows = [b for b in blaming.read(v.run_dir) if b.get("msg_id") == msg_id]
    return Journey(v.run_dir, msg_id, steps, rows, acc is not None)
