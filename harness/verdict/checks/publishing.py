"""The publisher's promises: the timeout both ways, no resend after an ack, prompt acks."""

from __future__ import annotations

from typing import Any

from harness.verdict import fromaccount
from harness.verdict.checks.base import (
    Breach,
    Check,
    bound,
    evidence,
    first_attempts,
    measured,
    not_applicable,
    rounded,
    verdict_of,
)
from harness.verdict.view import RunView
from spark_analysis.percentile import nearest_rank


def publisher_timeout(v: RunView) -> Check:
    """Retry until mb.publisher.timeout, then drop: nothing dropped early, nothing attempted after
    its deadline or its drop, nothing left unresolved past its deadline."""
    tol = bound(v, "drop_tolerance_s")
    bad: list[dict[str, Any]] = []
    judged = False
    timed_out = 0  # drops at the timeout (not at shutdown): the scorecard's measure
    stopped = v.observations.get("agents_stopped_ts") or {}
    for agent, recs in v.records.items():
        timeout = v.publisher_timeout(agent)
        firsts = first_attempts(recs)
        if timeout is None or not firsts:
            continue
        judged = True
        end = float(stopped.get(agent) or max(r["ts"] for r in recs))
        dropped: dict[str, float] = {}
        acked: set[str] = set()
        for r in recs:
            m, ev = str(r.get("msg_id")), r.get("event")
            if ev == "dropped" and m in firsts:
                dropped.setdefault(m, r["ts"])
                timed_out += r.get("reason") != "shutdown"
                age = r["ts"] - firsts[m]
                if r.get("reason") != "shutdown" and age < timeout - tol:
                    bad.append(
                        evidence(v, r, f"dropped {age:.1f} s after its first attempt (timeout {timeout:g} s)")
                    )
            elif ev == "sent":
                acked.add(m)
            elif ev == "send_attempt" and m in firsts and r["ts"] > firsts[m]:
                if m in dropped:
                    bad.append(evidence(v, r, "attempted again after it was dropped"))
                elif r["ts"] > firsts[m] + timeout + tol:
                    late = r["ts"] - firsts[m]
                    bad.append(
                        evidence(
                            v, r, f"attempted {late:.1f} s after its first attempt (timeout {timeout:g} s)"
                        )
                    )
        for m, t in firsts.items():
            if m not in acked and m not in dropped and t + timeout + tol < end:
                bad.append(
                    {
                        "msg_id": m,
                        "ts": rounded(t),
                        "what": f"neither sent nor dropped {timeout:g} s after its first attempt",
                    }
                )
    if not judged:
        return not_applicable("publisher_timeout", "nothing was published")
    out = verdict_of("publisher_timeout", bad, "mb.publisher.timeout not honoured", v.faults)
    return measured(out, {"dropped_at_timeout": [timed_out]})


def no_resend_after_ack(v: RunView) -> Check:
    bad = []
    for recs in v.records.values():
        acked: dict[str, float] = {}
        for r in recs:
            m = str(r.get("msg_id"))
            if r.get("event") == "sent":
                acked.setdefault(m, r["ts"])
            elif r.get("event") == "send_attempt" and m in acked:
                bad.append(evidence(v, r, "sent again after the broker acknowledged it"))
    return verdict_of("no_resend_after_ack", bad, "acknowledged messages sent again (duplicates)", v.faults)


def publish_latency(v: RunView) -> Check:
    """While a broker serves (no fault window near), a publish is acknowledged within the bound."""
    limit = bound(v, "publish_latency_s")
    bad, judged = [], False
    breaches: list[Breach | None] = []
    lat: list[float] = []
    late: dict[str, tuple[float, float]] = {}  # msg_id -> (first attempt, ack)
    for recs in v.records.values():
        firsts = first_attempts(recs)
        for r in recs:
            if r.get("event") != "sent" or str(r.get("msg_id")) not in firsts:
                continue
            t0 = firsts[str(r["msg_id"])]
            if any(w.start - 1.0 <= r["ts"] and t0 <= (w.end or float("inf")) + 5.0 for w in v.faults):
                continue
            judged = True
            lat.append(r["ts"] - t0)
            if r["ts"] - t0 > limit:
                breaches.append(Breach(t0, r["ts"], r["ts"] - t0 - limit))
                late[str(r["msg_id"])] = (t0, r["ts"])
                bad.append(
                    evidence(
                        v, r, f"acknowledged {r['ts'] - t0:.1f} s after its first attempt (bound {limit:g} s)"
                    )
                )
    if not judged:
        return not_applicable("publish_latency", "no publish away from fault windows")
    detail = "slow publishes on a serving broker" + _receipts_lag(v, late, limit)
    out = verdict_of("publish_latency", bad, detail)
    out.breaches = breaches
    return measured(
        out,
        {"publish_latency_p50_s": [nearest_rank(lat, 50)], "publish_latency_p95_s": [nearest_rank(lat, 95)]},
    )


def _arrivals(v: RunView, msg_ids: set[str]) -> dict[str, float]:
    """msg_id -> its first arrival at a broker, from the broker's account ({} without one)."""
    acc = fromaccount.load(v, msg_ids)
    if acc is None:
        return {}
    out = {}
    for m in msg_ids:
        ts = [
            float(r["ts"])
            for r in acc.messages.get(m, [])
            if r.get("event") == "arrived" and not r.get("via")
        ]
        if ts:
            out[m] = min(ts)
    return out


def _receipts_lag(v: RunView, late: dict[str, tuple[float, float]], limit: float) -> str:
    """How late the subscribers got the late publishes, beside how late they were acknowledged: a
    receipt past the bound too puts the delay before the broker's dispatch (its backlog, or a
    publisher that sent late: the broker's account tells which, by each arrival); one within it,
    on the ack's way back."""
    if not late:
        return ""
    receipts: dict[str, float] = {}
    for recs in v.records.values():
        for r in recs:
            m = str(r.get("msg_id"))
            if r.get("event") == "received" and m in late:
                receipts[m] = min(receipts.get(m, r["ts"]), r["ts"])
    if not receipts:
        return ""
    received = nearest_rank([t - late[m][0] for m, t in receipts.items()], 50)
    acked = nearest_rank([late[m][1] - late[m][0] for m in receipts], 50)
    arrived = _arrivals(v, set(receipts))
    if received <= limit:
        where = "the messages reached the subscribers within the bound, so the acks came back late"
    elif arrived:  # the broker's account says when each reached the broker
        into = nearest_rank([arrived[m] - late[m][0] for m in arrived], 50)
        where = f"the broker received them a median {into:.1f} s after the first attempt: " + (
            "the broker received it late (a late send)"
            if into > limit
            else "the broker held it (its backlog)"
        )
    else:
        where = (
            "the messages reached the subscribers late too (a backlog at the broker, or a late send: "
            "this run has no broker account to tell which)"
        )
    return (
        f"; {len(receipts)} of them received, the first receipt a median {received:.1f} s after the first "
        f"attempt against {acked:.1f} s for the ack: {where}"
    )
