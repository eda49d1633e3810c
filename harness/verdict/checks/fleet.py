"""Fleet promises (docs/verdict.md): judged only on a fleet run (run.json scenario params `fleet`),
over its members' figures (harness/verdict/checks/fleetview.py); n/a on every other run."""

from __future__ import annotations

from typing import Any

from harness.verdict.checks.base import Breach, Check, bound, measured, not_applicable, rounded, verdict_of
from harness.verdict.checks.fleetview import FleetView
from harness.verdict.resubscribed import back_at
from harness.verdict.view import RunView

NOT_A_FLEET = "not a fleet run"
# The storm's rate is judged over 2 s: the reference's backoff makes at most 6 passes over 2 URLs
# in its first 2 s (6.5 attempts per role per second with the success), lock-step retries 20.
STORM_WINDOW_S = 2.0
SUSTAINED_WINDOW_S = 20.0  # a storm's attempts over this long: lock-step retries stay dense
#: the storm's rate bounds and the windows they are judged over
STORM_RATES = (
    ("storm_attempts_per_role_s", STORM_WINDOW_S),
    ("storm_sustained_per_role_s", SUSTAINED_WINDOW_S),
)


def fleet_recovery(v: RunView) -> Check:
    """Every member's every role that a fault took down is back (subscribed again, or the publisher
    connected again) within `fleet_recover_bound_s` of the fault's end; p50/p95/max reported."""
    f = FleetView.of(v)
    if f is None:
        return not_applicable("fleet_recovery", NOT_A_FLEET)
    if not f.recoveries:
        return not_applicable("fleet_recovery", "no fault took a member's connection down")
    limit = bound(v, "fleet_recover_bound_s")
    bad = []
    breaches: list[Breach | None] = []
    for r in f.recoveries:
        late = r.after_end_s
        if r.back_ts is None or (late is not None and late > limit):
            back, start = r.back_ts, min(r.lost_ts, r.start)
            breaches.append(None if back is None or late is None else Breach(start, back, late - limit))
            took = "never" if r.took_s is None else f"{r.took_s:.1f} s after the fault began"
            bad.append(
                {
                    "ts": rounded(r.lost_ts),
                    "agent": r.agent,
                    "role": r.role,
                    "fault": r.fault,
                    "what": f"back {took} (bound: {limit:g} s after the fault's end)",
                }
            )
    d = f.distribution()
    slow = ", ".join(f"{r.agent} {r.role} {r.took_s:.1f} s" for r in f.slowest(3) if r.took_s is not None)
    detail = (
        f"{d['n']} roles of {len(f.members)} agents back: p50 {d.get('p50')} s, p95 {d.get('p95')} s, "
        f"max {d.get('max')} s after the fault began; slowest: {slow or '-'}"
    )
    out = verdict_of("fleet_recovery", bad, detail, v.faults)
    out.breaches = breaches
    if d["n"]:
        measured(out, {f"fleet_recovery_{q}_s": [d[q]] for q in ("p50", "p95", "max")})
    out.detail = detail if out.ok else f"a member not back within the bound; {detail}"
    if out.ok:
        out.evidence = [
            {
                "ts": rounded(r.back_ts),
                "agent": r.agent,
                "role": r.role,
                "what": f"slowest: back {r.took_s:.1f} s after {r.fault} began",
            }
            for r in f.slowest()
            if r.took_s is not None
        ]
    return out


def no_agent_left_behind(v: RunView) -> Check:
    """After the last fault, every member is alive, every subscription of it subscribed again or
    restored (harness/verdict/resubscribed.py; or never lost) and receiving (when the fleet as a
    whole received anything after it)."""
    f = FleetView.of(v)
    if f is None:
        return not_applicable("no_agent_left_behind", NOT_A_FLEET)
    ends = [w.end for w in f.windows if w.end is not None]
    last = max(ends, default=None)
    early = set(v.observations.get("agents_exited_early") or [])
    bad: list[dict[str, Any]] = []
    fleet_received_after = last is not None and any(
        r["ts"] > last and r.get("event") == "received" for a in f.members for r in v.records.get(a, [])
    )
    for agent in f.members:
        recs = v.records.get(agent, [])
        if agent in early:
            bad.append({"agent": agent, "what": "exited before the run ended"})
            continue
        subs = [
            s.get("topic")
            for s in ((v.agents.get(agent) or {}).get("workload") or {}).get("subscriptions") or []
            if isinstance(s, dict)
        ]
        for topic in subs:
            role = f"subscriber:{topic}"
            state = None  # the role's last connection record
            lost = float("-inf")  # its last disconnect (a failed attempt too)
            got_after = False
            for r in recs:
                ev = r.get("event")
                if ev in ("connected", "disconnected") and r.get("role") == role:
                    if ev == "disconnected" and str(r.get("reason", "")).startswith("shutdown"):
                        continue
                    state = ev
                    if ev == "disconnected":
                        lost = r["ts"]
                elif ev == "received" and r.get("subscription") == topic and last is not None:
                    got_after = got_after or r["ts"] > last
            # subscribed again (or restored, as the broker witness saw) since its last disconnect
            subscribed_since = state == "connected" and back_at(v, agent, role, lost) is not None
            if state != "connected" or not subscribed_since:
                bad.append({"agent": agent, "role": role, "what": "not subscribed at the end of the run"})
            elif fleet_received_after and not got_after:
                bad.append(
                    {
                        "agent": agent,
                        "role": role,
                        "ts": rounded(last),
                        "what": "received nothing after the last fault while the fleet did",
                    }
                )
    if last is None and not bad:
        return Check("no_agent_left_behind", detail=f"{len(f.members)} agents subscribed at the end")
    out = verdict_of("no_agent_left_behind", bad, "a member left behind after the last fault", v.faults)
    if out.ok:
        out.detail = f"all {len(f.members)} agents subscribed and receiving after the last fault"
    return out


def reconnect_storm(v: RunView) -> Check:
    """The fleet's connection attempts seen at the brokers' side (the fault proxy's accepted
    connections plus attempts refused before it) stay under `storm_attempts_per_role_s` per role
    per second over any 2 s and `storm_sustained_per_role_s` over any 20 s, and every member is
    back within `storm_all_back_s` of each fault's end."""
    f = FleetView.of(v)
    if f is None:
        return not_applicable("reconnect_storm", NOT_A_FLEET)
    if not f.windows:
        return not_applicable("reconnect_storm", "no broker fault: no storm to judge")
    roles = max(f.roles, 1)
    peak_1s, _ = f.peak_per_s(1.0)
    (peak, per_role, over), (sustained, sustained_bound, over_long) = (
        _densest(v, f, name, span) for name, span in STORM_RATES
    )
    bad = [row for row, _ in (over, over_long) if row]
    breaches: list[Breach | None] = [b for _, b in (over, over_long) if b]
    back_bound = bound(v, "storm_all_back_s")
    backs = []
    for w, took in f.all_back():
        backs.append("never" if took is None else f"{took:.1f} s")
        if took is None or took > back_bound:
            end = w.end if w.end is not None else w.start
            breaches.append(None if took is None else Breach(end, end + took, took - back_bound))
            bad.append(
                {
                    "ts": rounded(w.end if w.end is not None else w.start),
                    "fault": w.fault_id,
                    "what": f"every agent back {'never' if took is None else f'{took:.1f} s'} after "
                    f"{w.fault_id} ended (bound {back_bound:g} s)",
                }
            )
    source = "proxy + agents' refused attempts" if f.proxy_accepts else "agents' refused attempts only"
    detail = (
        f"peak {peak:.0f} attempts/s over {STORM_WINDOW_S:g} s ({peak / roles:.1f} per role, "
        f"bound {per_role:g}); over {SUSTAINED_WINDOW_S:g} s {sustained / roles:.2f} per role "
        f"(bound {sustained_bound:g}); busiest 1 s: {peak_1s:.0f}; {source}; "
        f"every agent back after the fault's end: {', '.join(backs) or '-'}"
    )
    out = verdict_of("reconnect_storm", bad, f"reconnect storm over its bounds: {detail}", v.faults)
    out.breaches = breaches
    measured(
        out,
        {
            "storm_attempts_per_role_s": [peak / roles],
            "storm_sustained_per_role_s": [sustained / roles],
            "storm_all_back_s": [took for _, took in f.all_back() if took is not None],
        },
    )
    if out.ok:
        out.detail = detail
    return out


def _densest(
    v: RunView, f: FleetView, name: str, span: float
) -> tuple[float, float, tuple[dict[str, Any] | None, Breach | None]]:
    """The fleet's densest `span` s of attempts against the per-role bound `name`: (attempts/s,
    the bound, and when over it the bad row and its breach: the time its attempts would need to
    fit the bound)."""
    per_role = bound(v, name)
    limit = per_role * max(f.roles, 1)
    peak, at = f.peak_per_s(span)
    if peak <= limit:
        return peak, per_role, (None, None)
    what = (
        f"{peak:.0f} connection attempts/s over {span:g} s from {f.roles} roles "
        f"(bound {per_role:g} per role: {limit:.0f}/s)"
    )
    breach = Breach(at - span, at + span, span * (peak / limit - 1), rate=True)
    return peak, per_role, ({"ts": rounded(at), "what": what}, breach)


def fairness(v: RunView) -> Check:
    """No member's deliveries starved: each received at least `fairness_min_share` of the median
    member's (members share one workload shape)."""
    f = FleetView.of(v)
    if f is None:
        return not_applicable("fairness", NOT_A_FLEET)
    med = f.median_deliveries()
    if med <= 0:
        return not_applicable("fairness", "the members received nothing")
    share = bound(v, "fairness_min_share")
    bad = [
        {"agent": a, "what": f"{n} deliveries, {n / med:.0%} of the median {med:g} (bound {share:.0%})"}
        for a, n in sorted(f.deliveries.items())
        if n < share * med
    ]
    low, high = min(f.deliveries.values()), max(f.deliveries.values())
    detail = f"deliveries per agent: min {low}, median {med:g}, max {high}"
    out = verdict_of("fairness", bad, f"a member starved; {detail}")
    if out.ok:
        out.detail = detail
    return out
