"""Promises judged from the reconciliation's counts (analysis/summary.json) and the traffic: the
counts over the policy's limits (limits.py) are the violations."""

from __future__ import annotations

from typing import Any

from harness.verdict import fromaccount
from harness.verdict.checks.base import HEALS, Check, measured, rounded, verdict_of
from harness.verdict.checks.limits import anomalies
from harness.verdict.checks.serving import never_connected
from harness.verdict.view import RunView


# -- from the reconciliation (analysis/summary.json) -------------------------------------------
def _policy_items(v: RunView, kinds: tuple[str, ...]) -> list[dict[str, Any]]:
    """The anomalies of `kinds` over the policy's limits."""
    return [r for r in anomalies(v.summary)[0] if r["kind"] in kinds]


def _msg_evidence(v: RunView, msg_ids: list[str], what: str) -> list[dict[str, Any]]:
    first: dict[str, dict[str, Any]] = {}
    for r in v.events("send_attempt") + v.events("sent"):
        first.setdefault(str(r.get("msg_id")), r)
    out = []
    for m in msg_ids:
        r = first.get(m, {})
        out.append(
            {"msg_id": m, "ts": rounded(r.get("ts")), "broker": v.broker(r.get("broker")), "what": what}
        )
    return out


def _from_policy(v: RunView, promise: str, kinds: tuple[str, ...]) -> Check:
    items = _policy_items(v, kinds)
    if not items:
        return Check(promise)
    evidence: list[dict[str, Any]] = []
    for it in items:
        evidence += _msg_evidence(
            v, [str(x) for x in it.get("examples") or []], f"{it['kind']}: {it.get('what')}"
        )
    detail = "; ".join(f"{it['kind']}={it['count']} (limit {it.get('limit')})" for it in items)
    c = Check(promise, "fail", sum(int(it["count"]) for it in items), evidence, None, detail)
    c.fault = verdict_of(promise, [e for e in evidence if e.get("ts")], "", v.faults).fault
    return c


def at_least_once(v: RunView) -> Check:
    return _from_policy(v, "at_least_once", ("lost",))


def integrity(v: RunView) -> Check:
    kinds = ("unexpected", "ghost_timeout", "ghost_dropped_other", "ghost_in_doubt", "misrouted")
    return _from_policy(v, "integrity", kinds)


def no_downgrade(v: RunView) -> Check:
    """What the agent logged below the workload's QoS (the reconciliation's `downgraded`), and
    subscriptions the broker's account shows were not durable though the workload asks it."""
    items = _policy_items(v, ("downgraded",))
    ev = [{"what": str(x)} for it in items for x in it.get("examples") or []]
    broker = fromaccount.not_durable(v)
    count = sum(int(it["count"]) for it in items) + len(broker)
    if not count:
        return Check("no_downgrade")
    ev = broker + ev
    return Check("no_downgrade", "fail", count, ev, None, ev[0]["what"] if ev else "")


def policy(v: RunView) -> Check:
    """What the verdict policy limits beyond the named promises (duplicates, malformed records)."""
    out = _from_policy(v, "policy", ("duplicated", "malformed", "vacuous_fault"))
    return measured(out, {"duplicates": [int((v.summary.get("deliveries") or {}).get("duplicated") or 0)]})


def non_vacuous(v: RunView) -> Check:
    """A run that attempted nothing, or a fault window with no traffic at all, proves nothing."""
    totals = v.summary.get("totals") or {}
    bad: list[dict[str, Any]] = []
    if not totals.get("attempted"):
        bad.append({"what": "no message was attempted"})
    elif (
        v.params.get("expect_acks", True)
        and not totals.get("acknowledged")
        and not any(e["role"] == "publisher" for e in never_connected(v))
    ):  # a publisher that gave up while a broker served is the agent's (connect_timeout), not emptiness
        bad.append({"what": "no message was acknowledged by a broker"})
    traffic = sorted(
        r["ts"]
        for rs in v.records.values()
        for r in rs
        if r.get("event") in ("send_attempt", "sent", "received")
    )
    settle = float((v.summary.get("policy") or {}).get("settle_s", 10.0))
    for w in v.faults:
        if w.end is None or w.fault in HEALS:
            continue
        if not any(w.start <= t <= w.end + settle for t in traffic):
            bad.append(
                {"ts": rounded(w.start), "fault": w.fault_id, "what": f"no traffic during {w.fault_id}"}
            )
    return verdict_of("non_vacuous", bad, "the run proves nothing where it has no traffic")
