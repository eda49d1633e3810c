"""When some member served an agent, and the roles that never connected while one did.

A role that never connects although a broker of its `mb.urls` served for a whole connect bound is
the agent's broken promise (it stopped retrying), not a run that proved nothing (issue 35).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.verdict.checks.base import BROKER_OUTAGES, bound, roles, span_end
from harness.verdict.view import RunView

STEP_S = 0.25  # sampling step of the serving timeline


def masters(v: RunView) -> Callable[[str, float], str | None]:
    """Who served each group at a time outside fault windows: the first master, then each takeover."""
    start = v.observations.get("masters") or {}
    changes = sorted(
        (w.end, str(w.params.get("group")), str(w.params["new_master"]))
        for w in v.faults
        if w.end is not None and w.params.get("new_master")
    )

    def at(group: str, ts: float) -> str | None:
        m = start.get(group)
        for t, g, new in changes:
            if g == group and t <= ts:
                m = new
        return m

    return at


def serves(v: RunView, agent: str) -> Callable[[float], bool]:
    """Whether a broker of the agent's mb.urls was its group's master, outside every outage window
    that hits it, at a time. Conservative: a takeover counts only once its window ended."""
    master_at = masters(v)
    group_of = {b: g for g, bs in v.groups.items() for b in bs}
    brokers = {b for u in v.urls(agent) if (b := v.broker(u)) is not None}
    outages = [(w, v.affected_brokers(w)) for w in v.faults if w.fault in BROKER_OUTAGES]

    def down(b: str, ts: float) -> bool:
        return any(b in hit and w.covers(ts) for w, hit in outages)

    def at(ts: float) -> bool:
        return any(master_at(group_of.get(b, ""), ts) == b and not down(b, ts) for b in brokers)

    return at


def longest_serving(v: RunView, agent: str, t0: float, t1: float) -> tuple[float, float]:
    """(start, length) of the longest stretch in [t0, t1] in which some member served the agent."""
    at = serves(v, agent)
    best, run_start, t = (t0, 0.0), None, t0
    t1 = span_end(t0, t1)  # observations whose clocks disagree: the judge still ends
    while t <= t1:
        if at(t):
            run_start = t if run_start is None else run_start
            if t - run_start > best[1]:
                best = (run_start, t - run_start)
        else:
            run_start = None
        t += STEP_S
    return best


def _role_end(recs: list[dict[str, Any]], role: str, stopped: float) -> float:
    """Until when a role had work: a publisher while it attempted or dropped, a subscriber to the end."""
    if role != "publisher":
        return stopped
    return max((r["ts"] for r in recs if r.get("event") in ("send_attempt", "dropped")), default=0.0)


def never_connected(v: RunView) -> list[dict[str, Any]]:
    """Evidence for each role that never connected while a member served it for a connect bound."""
    limit = bound(v, "connect_bound_s")
    started = v.observations.get("agents_launched_ts") or {}
    stopped = v.observations.get("agents_stopped_ts") or {}
    if not v.observations.get("masters"):
        return []
    out = []
    for agent, t0 in started.items():
        recs = v.records.get(str(agent), [])
        done = {str(r.get("role")) for r in recs if r.get("event") == "connected"}
        end_of_run = float(stopped.get(agent) or max((r["ts"] for r in recs), default=0.0))
        for role in roles(v, str(agent)):
            if role in done:
                continue
            since, length = longest_serving(v, str(agent), float(t0), _role_end(recs, role, end_of_run))
            if length < limit:
                continue
            tries = [r["ts"] for r in recs if r.get("role") == role and r.get("event") == "disconnected"]
            last = f"its last attempt {tries[-1] - float(t0):.1f} s after launch" if tries else "no attempt"
            out.append(
                {
                    "ts": round(since, 3),
                    "agent": agent,
                    "role": role,
                    "what": f"{role} never connected although a member served for {length:.1f} s "
                    f"from {since - float(t0):.1f} s after launch (bound {limit:g} s): "
                    f"{len(tries)} failed attempt(s), {last}; it stopped retrying",
                }
            )
    return out
