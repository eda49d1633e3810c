"""Connection promises: liveness, list order, bounded attempts, recovery, confirmed subscriptions,
independent failover, backoff."""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from typing import Any

from harness.contracts.scorecard import measure_name
from harness.verdict.checks.base import (
    BROKER_OUTAGES,
    Breach,
    Check,
    bound,
    connections,
    evidence,
    launched,
    measured,
    not_applicable,
    roles,
    rounded,
    verdict_of,
)
from harness.verdict.checks.serving import masters, never_connected
from harness.verdict.resubscribed import back_at
from harness.verdict.view import RunView, Window
from harness.witness.brokerlog import line_ts

AUTH_REJECTED = re.compile(
    r"Failed to add Connection.*(password is invalid|User name .* invalid|not authorized)"
)


def liveness(v: RunView) -> Check:
    """Every connection to a broker that dies, stops, pauses or goes silent is given up within the
    liveness bound (the OS TCP timeout is no liveness check)."""
    limit = bound(v, "liveness_bound_s")
    bad, judged = [], False
    breaches: list[Breach | None] = []
    for w in v.faults:
        if w.fault not in BROKER_OUTAGES:
            continue
        hit = v.affected_brokers(w)
        for agent, recs in v.records.items():
            for role, url, t0, t1 in connections(recs):
                if v.broker(url) not in hit or not (t0 < w.start < t1):
                    continue
                judged = True
                horizon = w.end if w.end is not None else v.traffic_end()
                if t1 - w.start > limit and (horizon - w.start) > limit:
                    took = "never" if t1 == float("inf") else f"after {t1 - w.start:.1f} s"
                    breaches.append(None if t1 == float("inf") else Breach(w.start, t1, t1 - w.start - limit))
                    bad.append(
                        {
                            "ts": rounded(w.start),
                            "agent": agent,
                            "role": role,
                            "broker": v.broker(url),
                            "fault": w.fault_id,
                            "what": f"{w.fault} of {v.broker(url)} noticed {took} (bound {limit:g} s)",
                        }
                    )
    if not judged:
        return not_applicable("liveness", "no fault cut a standing connection")
    out = verdict_of(
        "liveness", bad, "a dead or silent broker not noticed within the liveness bound", v.faults
    )
    out.breaches = breaches
    return out


def address(url: Any) -> str:
    """host:port of a URL as mb.urls or a log record writes it (`ssl://` or not)."""
    return str(url or "").split("://")[-1]


def first_available(v: RunView) -> Check:
    """Each (re)connect uses the first URL of mb.urls whose broker serves (judged away from faults)."""
    if not v.observations.get("masters"):
        return not_applicable("first_available", "the run did not record which broker served")
    master_at = masters(v)
    group_of = {b: g for g, bs in v.groups.items() for b in bs}
    bad, judged = [], False
    for agent, recs in v.records.items():
        urls = v.urls(agent)
        for r in recs:
            if r.get("event") != "connected" or any(w.covers(r["ts"], 1.0, 3.0) for w in v.faults):
                continue
            serving = [
                u
                for u in urls
                if (b := v.broker(u)) is not None and master_at(group_of.get(b, ""), r["ts"]) == b
            ]
            if not serving:
                continue
            judged = True
            used = address(r.get("broker"))
            plain = [address(u) for u in urls]
            if used not in plain or plain.index(used) > plain.index(address(serving[0])):
                bad.append(
                    evidence(v, r, f"connected to {used} while {serving[0]} (earlier in mb.urls) served")
                )
    if not judged:
        return not_applicable("first_available", "no connection away from fault windows")
    return verdict_of("first_available", bad, "not the first available broker in mb.urls order")


MIN_HEALTHY_S = 5.0  # a correct agent connects past a black hole and a dead port in ~2 s


def connect_timeout(v: RunView) -> Check:
    """Every role connects within a bound of its agent's launch: a black-holed or dead URL ahead of
    a serving broker costs a connect timeout, not a trap."""
    started = launched(v)
    if not started:
        return not_applicable("connect_timeout", "the run did not record when agents started")
    limit = bound(v, "connect_bound_s")
    first_fault = min((w.start for w in v.faults), default=float("inf"))
    bad, judged = [], False
    breaches: list[Breach | None] = []
    for agent, t0 in started.items():
        recs = v.records.get(agent, [])
        firsts: dict[str, float] = {}
        for r in recs:
            if r.get("event") == "connected":
                firsts.setdefault(str(r.get("role")), r["ts"])
        publisher_done = any(r.get("event") == "dropped" for r in recs) and "publisher" not in firsts
        # Judged over the healthy time after launch: up to the bound, or to the first fault when
        # that came sooner but still left a correct agent ample time (MIN_HEALTHY_S).
        grace = min(limit, first_fault - t0)
        if grace < MIN_HEALTHY_S:
            continue
        for role in roles(v, agent):
            t = firsts.get(role)
            if role == "publisher" and publisher_done:
                continue
            judged = True
            if t is None or t - t0 > grace:
                took = f"{t - t0:.1f} s after launch" if t is not None else "never"
                breaches.append(None if t is None else Breach(t0, t, t - t0 - grace))
                bad.append(
                    {
                        "ts": rounded(t0),
                        "agent": agent,
                        "role": role,
                        "what": f"not connected within {grace:.1f} s of launch while a broker served "
                        f"(first connection: {took}; bound {limit:g} s)",
                    }
                )
    # A fault first leaves the launch bound unjudged, not a role that gave up: one that never
    # connected while a member served for a whole bound stopped retrying (issue 35).
    seen = {(e["agent"], e["role"]) for e in bad}
    for e in never_connected(v):
        judged = True
        if (e["agent"], e["role"]) not in seen:
            bad.append(e)
            breaches.append(None)  # gave up: no time past a bound
    if not judged:
        return not_applicable("connect_timeout", "no role to judge")
    out = verdict_of("connect_timeout", bad, "a role did not connect while a broker served")
    out.breaches = breaches
    return out


def recovery(v: RunView) -> Check:
    """After every fault window ends, each role that lost its connection is back within the bound
    (harness/verdict/resubscribed.py: subscribed again, or restored as the broker witness saw), and
    publishing never stalls."""
    limit = bound(v, "recover_bound_s")
    bad: list[dict[str, Any]] = []
    took: dict[str, list[float]] = defaultdict(list)  # the scorecard's measures
    if v.observations.get("stalled"):
        bad.append({"what": "the agents stopped publishing (no message sent or dropped for the stall limit)"})
    for agent in v.observations.get("not_subscribed") or []:
        bad.append({"agent": agent, "what": "not subscribed within the harness's subscribe wait"})
    breaches: list[Breach | None] = [None] * len(bad)  # a stall, a wait: no time past a bound
    stopped = v.observations.get("agents_stopped_ts") or {}
    for agent, recs in v.records.items():
        end_of_run = float(stopped.get(agent) or max((r["ts"] for r in recs), default=0.0))
        last_publish = max(
            (r["ts"] for r in recs if r.get("event") in ("send_attempt", "dropped")), default=float("-inf")
        )
        tried = _attempts(recs)
        for w in v.faults:
            if w.end is None or w.end + limit > end_of_run:
                continue
            lost = _lost_in(recs, w)  # role -> when it lost its connection in this window
            for role in sorted(lost):
                if role == "publisher" and not last_publish > w.end:
                    continue
                back = back_at(v, agent, role, w.start, w.end + limit)
                if back is not None:
                    _measure_back(took, tried, role, lost[role], back.ts)
                else:
                    later = back_at(v, agent, role, w.start)  # back after the bound, or never
                    breaches.append(
                        None if later is None else Breach(w.end, later.ts, later.ts - w.end - limit)
                    )
                    bad.append(
                        {
                            "ts": rounded(w.end),
                            "agent": agent,
                            "role": role,
                            "fault": w.fault_id,
                            "what": f"not reconnected within {limit:g} s of the end of {w.fault_id}",
                        }
                    )
    _late_recoveries(v, limit, took)
    took["takeover_to_delivery_s"] = _takeover_to_delivery(v)
    out = verdict_of("recovery", bad, "the agent did not come back after a fault", v.faults)
    out.breaches = breaches
    return measured(out, {k: x for k, x in took.items() if x})


def _takeover_to_delivery(v: RunView) -> list[float]:
    """Per broker outage: from its start to the first delivery any subscriber logged after it."""
    received = [float(r["ts"]) for r in v.events("received")]
    out = []
    for w in v.faults:
        if w.fault not in BROKER_OUTAGES:
            continue
        i = bisect.bisect_right(received, w.start)
        if i < len(received):
            out.append(received[i] - w.start)
    return out


#: a disconnect that is no lost connection: a failed attempt, or the agent done
NOT_LOST = ("connect_failed", "publications_complete", "shutdown")


def _lost_in(recs: list[dict[str, Any]], w: Window) -> dict[str, float]:
    """role -> when it first lost its connection in the window (not a failed attempt, not done)."""
    lost: dict[str, float] = {}
    for r in recs:
        if (
            r.get("event") == "disconnected"
            and w.covers(r["ts"], 0.2, 0.5)
            and not str(r.get("reason", "")).startswith(NOT_LOST)
        ):
            lost.setdefault(str(r.get("role")), float(r["ts"]))
    return lost


def _late_recoveries(v: RunView, limit: float, took: dict[str, list[float]]) -> None:
    """The recovery measures of the windows `recovery` does not judge, their end plus the bound
    past the agent's stop (a masterslave kill's heal comes late in the run): a role that was back
    is measured all the same, for the scorecard; one not back yet is neither a measure nor a fail."""
    stopped = v.observations.get("agents_stopped_ts") or {}
    for agent, recs in v.records.items():
        end_of_run = float(stopped.get(agent) or max((r["ts"] for r in recs), default=0.0))
        tried = _attempts(recs)
        for w in v.faults:
            if w.end is None or w.end + limit <= end_of_run:
                continue  # judged, and measured, by recovery's own loop
            for role, at in sorted(_lost_in(recs, w).items()):
                back = back_at(v, agent, role, w.start, w.end + limit)
                if back is not None:
                    _measure_back(took, tried, role, at, back.ts)


def _attempts(recs: list[dict[str, Any]]) -> dict[str, list[float]]:
    """role -> the times of its connection records (failed attempts, connections, losses), sorted."""
    out: dict[str, list[float]] = defaultdict(list)
    for r in recs:
        if r.get("event") in ("connected", "disconnected"):
            out[str(r.get("role"))].append(float(r["ts"]))
    for ts in out.values():
        ts.sort()
    return out


def _measure_back(
    took: dict[str, list[float]], tried: dict[str, list[float]], role: str, lost: float, back: float
) -> None:
    """A role back at `back` after losing its connection at `lost`: its recovery, and the longest
    pause between its attempts meanwhile (lost -> each connect_failed or connected -> the last one
    before back), which is what its backoff reached: the takeover's own time is not in it."""
    took[measure_name("recovery_s", role)].append(max(0.0, back - lost))
    ts = tried.get(role, [])
    points = [lost, *ts[bisect.bisect_right(ts, lost) : bisect.bisect_right(ts, back)]]
    if len(points) > 1:
        pauses = (b - a for a, b in zip(points, points[1:], strict=False))
        took[measure_name("retry_pause_max_s", role)].append(max(pauses))


def subscription_confirmed(v: RunView) -> Check:
    """`subscribed` is logged only on a live connection to the broker it names (after SUBACK).
    The broker's own view of the same claims is `consumer_confirmed` (checks/witness.py)."""
    bad, judged = [], False
    for recs in v.records.values():
        conns = connections(recs)
        by_role: dict[str, list[tuple[str, str | None, float, float]]] = {}
        for c in conns:  # grouped once: a scan per `subscribed` was quadratic (issue 34)
            by_role.setdefault(c[0], []).append(c)
        for r in recs:
            if r.get("event") != "subscribed":
                continue
            judged = True
            own = by_role.get(f"subscriber:{r.get('topic')}") or conns
            if not any(c[1] == r.get("broker") and c[2] <= r["ts"] <= c[3] for c in own):
                bad.append(
                    evidence(
                        v, r, f"subscribed {r.get('topic')} on {r.get('broker')} with no connection to it"
                    )
                )
    if not judged:
        return not_applicable("subscription_confirmed", "no subscription")
    return verdict_of("subscription_confirmed", bad, "subscribed before the broker confirmed", v.faults)


def independent_connections(v: RunView) -> Check:
    """Each subscription fails over on its own: one severed connection disturbs one role."""
    cuts = [w for w in v.faults if w.fault == "sever"]
    if not cuts:
        return not_applicable("independent_connections", "no connection was severed")
    span = bound(v, "cut_window_s")
    bad = []
    for w in cuts:
        for agent, recs in v.records.items():
            hit = {
                str(r.get("role"))
                for r in recs
                if r.get("event") == "disconnected" and w.start - 0.2 <= r["ts"] <= w.start + span
            }
            if len(hit) > 1:
                bad.append(
                    {
                        "ts": rounded(w.start),
                        "agent": agent,
                        "fault": w.fault_id,
                        "what": f"one cut disturbed {len(hit)} roles: {', '.join(sorted(hit))}",
                    }
                )
    # Every connection to the broker was cut once: fewer cuts than connected roles means shared ones.
    hit_brokers = set().union(*(v.affected_brokers(w) for w in cuts))
    first = cuts[0].start
    for agent, recs in v.records.items():
        live = {c[0] for c in connections(recs) if v.broker(c[1]) in hit_brokers and c[2] < first < c[3]}
        if len(live) > len(cuts):
            bad.append(
                {
                    "ts": rounded(first),
                    "agent": agent,
                    "what": f"{len(cuts)} connection(s) carried {len(live)} roles: {', '.join(sorted(live))}",
                }
            )
    return verdict_of("independent_connections", bad, "subscriptions share a connection", v.faults)


def bounded_retry(v: RunView) -> Check:
    """Failed connection attempts (refused, timed out, rejected credentials) stay under
    `retry_per_url_s` × len(mb.urls) per second per role, over any 5 s."""
    per_url = bound(v, "retry_per_url_s")
    bad, judged = [], False
    breaches: list[Breach | None] = []
    rates: dict[str, list[float]] = defaultdict(list)  # the scorecard's measures, one per agent
    for agent, recs in v.records.items():
        n_urls = max(len(v.urls(agent)), 1)
        fails: dict[str, list[float]] = defaultdict(list)
        for r in recs:
            if r.get("event") == "disconnected" and str(r.get("reason", "")).startswith("connect_failed"):
                fails[str(r.get("role"))].append(r["ts"])
        for role, ts in fails.items():
            judged = True
            worst = _densest(ts, 5.0)
            rates[measure_name("failed_attempts_per_s", role)].append(worst / 5.0)
            if worst / 5.0 > per_url * n_urls:
                breaches.append(_retry_breach(ts, worst, per_url * n_urls * 5))
                bad.append(
                    {
                        "ts": rounded(ts[0]),
                        "agent": agent,
                        "role": role,
                        "what": f"{worst} failed attempts in 5 s (bound {per_url * n_urls * 5:g})",
                    }
                )
    # Rejected credentials counted at the brokers: any agent, whatever it logs.
    rejected = sorted(
        t for lines in v.broker_logs.values() for x in lines if AUTH_REJECTED.search(x) and (t := line_ts(x))
    )
    if rejected:
        judged = True
        n_roles = sum(len(roles(v, a)) for a in v.agents) or 1
        n_urls = max((len(v.urls(a)) for a in v.agents), default=1)
        worst = _densest(rejected, 5.0)
        if worst / 5.0 > per_url * n_urls * n_roles:
            breaches.append(_retry_breach(rejected, worst, per_url * n_urls * n_roles * 5))
            bad.append(
                {
                    "ts": rounded(rejected[0]),
                    "what": f"{worst} rejected logins at the brokers in 5 s "
                    f"(bound {per_url * n_urls * n_roles * 5:g} for {n_roles} roles)",
                }
            )
    if v.params.get("expect_rejections") and not rejected:
        bad.append({"what": "no login rejected at the brokers: the agent stopped retrying"})
        breaches.append(None)
    elif not judged:
        return not_applicable("bounded_retry", "no failed connection attempt")
    out = verdict_of("bounded_retry", bad, "retrying without backoff")
    out.breaches = breaches
    return measured(out, rates)


def _retry_breach(ts: list[float], worst: int, limit: float) -> Breach:
    """The densest 5 s of attempts, and the time they would need to fit the bound (a rate)."""
    ts = sorted(ts)
    a = next((t for i, t in enumerate(ts[: len(ts) - worst + 1]) if ts[i + worst - 1] - t <= 5.0), ts[0])
    return Breach(a, a + 5.0, 5.0 * (worst / limit - 1), rate=True)


def _densest(ts: list[float], span: float) -> int:
    ts, best, lo = sorted(ts), 0, 0
    for hi, t in enumerate(ts):
        while t - ts[lo] > span:
            lo += 1
        best = max(best, hi - lo + 1)
    return best
