"""What every checker shares: the result type, the bounds, and readers of the agents' logs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.faults.kinds import logged_names
from harness.verdict.view import RunView, Window

EXAMPLES = 5
#: the longest timeline a checker steps along: far past any run's; a longer span is clocks that
#: disagree (records minutes apart read as years), cut here so the judge always ends
MAX_SPAN_S = 6 * 3600.0


def span_end(start: float, end: float) -> float:
    """`end`, at most MAX_SPAN_S past `start`."""
    return min(end, start + MAX_SPAN_S)


#: scenario params a run may override (run.json scenario.params), with their defaults
BOUNDS: dict[str, float] = {
    "liveness_bound_s": 8.0,  # docs: a dead or silent broker is noticed within 4 s (≤ 5 s)
    "connect_bound_s": 10.0,  # a role's first connection after launch, past black holes
    "recover_bound_s": 30.0,  # a role back after a fault window ends
    "publish_latency_s": 5.0,  # first attempt -> ack while the broker serves
    # failed attempts per URL per second over 5 s: the reference's backoff (0.1 s doubling to a 1 s
    # cap, jittered to [b/2, b]) allows 13 passes in its first 5 s at most (2.6/s per URL); a
    # retry every 0.1 s (the PCA's publisher) is 10/s
    "retry_per_url_s": 4.0,
    "drop_tolerance_s": 1.5,  # around first attempt + mb.publisher.timeout
    # a `masterslave:` bridge to a pair fails a few times around a takeover (4-7 measured, 7 on a
    # slow machine where a bridge's start also timed out); `static:(master,slave)` fails ~20 times
    "bridge_failures_max": 10.0,
    "cut_window_s": 2.5,  # roles disturbed by one severed connection are looked for this long
    # fleets (checks/fleet.py): a role back after the fault's end; connection attempts per role per
    # second over 2 s (the reference at most 6.5, lock-step retries 20)
    "fleet_recover_bound_s": 30.0,
    "storm_attempts_per_role_s": 9.0,
    # ... and over any 20 s: backoff thins a role's attempts (the reference 0.85-1.06 at 20 and 100
    # members, 0.36 at 1,000), lock-step retries do not (3.16 at 20; 3.57 at 1,000 members on two
    # cores, where the CPU holds their 2 s peak to 4.2, under the bound above: issue 44)
    "storm_sustained_per_role_s": 2.0,
    "storm_all_back_s": 30.0,
    "fairness_min_share": 0.5,  # of the median member's deliveries
}

HEALS = logged_names("heal")  # bringing a killed broker back: the heal of a fault, not a fault

BROKER_OUTAGES = logged_names("outage")  # the target serves no client while the window lasts


@dataclass(frozen=True)
class Breach:
    """One violation of a timing promise, as the overload rule reads it (harness/verdict/
    overload.py): the wall-time span of its evidence and the seconds past the bound (a rate's: the
    seconds its attempts would need to fit the bound, `rate`)."""

    start: float
    end: float
    past_s: float
    rate: bool = False


@dataclass
class Check:
    promise: str
    status: str = "pass"  # pass | fail | n/a
    count: int = 0
    evidence: list[dict[str, Any]] = field(default_factory=list)
    fault: str | None = None
    detail: str = ""
    blame: str | None = None  # whose fault its failures are, when the checker knows (broker findings)
    #: what the checker measured, by harness.contracts.scorecard.MEASURES name (small: percentiles)
    measures: dict[str, list[float]] = field(default_factory=dict)
    #: a timing checker's violations, every one (not only the evidence shown): a Breach, or None
    #: for one with no time past a bound (never back, a stall); read by verdict/overload.py
    breaches: list[Breach | None] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status != "fail"

    def to_dict(self) -> dict[str, Any]:
        return {
            "promise": self.promise,
            "status": self.status,
            "ok": self.ok,
            "count": self.count,
            "detail": self.detail,
            "fault": self.fault,
            "evidence": self.evidence[:EXAMPLES],
            **({"blame": self.blame} if self.blame else {}),
            **({"measures": self.measures} if self.measures else {}),
        }


def bound(v: RunView, name: str) -> float:
    try:
        return float(v.params.get(name, BOUNDS[name]))
    except (TypeError, ValueError):
        return BOUNDS[name]


def verdict_of(
    promise: str, bad: list[dict[str, Any]], detail: str, faults: list[Window] | None = None
) -> Check:
    if not bad:
        return Check(promise)
    fault = None
    if faults:
        hit = [w.fault_id for w in faults if any(w.covers(e.get("ts", -1), 1.0, 10.0) for e in bad)]
        fault = ",".join(sorted(set(hit))) or None
    return Check(
        promise, "fail", len(bad), sorted(bad, key=lambda e: e.get("ts") or 0)[:EXAMPLES], fault, detail
    )


def measured(check: Check, measures: dict[str, list[float]]) -> Check:
    """`check` with `measures` (rounded to the millisecond) added: the numbers a scorecard keeps."""
    for name, values in measures.items():
        check.measures[name] = [round(float(x), 3) for x in values]
    return check


def not_applicable(promise: str, why: str) -> Check:
    return Check(promise, "n/a", detail=why)


def rounded(ts: Any) -> Any:
    return round(ts, 3) if isinstance(ts, float) else ts


def evidence(v: RunView, r: dict[str, Any], what: str) -> dict[str, Any]:
    e = {"ts": rounded(r.get("ts")), "agent": r.get("agent"), "what": what}
    for k in ("msg_id", "role"):
        if r.get(k) is not None:
            e[k] = r[k]
    if r.get("broker"):
        e["broker"] = v.broker(r["broker"]) or r["broker"]
    return e


# -- from the agents' logs ---------------------------------------------------------------------
def first_attempts(recs: list[dict[str, Any]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in recs:
        if r.get("event") == "send_attempt" and "msg_id" in r:
            out.setdefault(str(r["msg_id"]), r["ts"])
    return out


def connections(recs: list[dict[str, Any]]) -> list[tuple[str, str | None, float, float]]:
    """(role, broker url, connected ts, disconnected ts or inf) of every established connection."""
    open_: dict[str, tuple[str | None, float]] = {}
    out = []
    for r in recs:
        role, ev = str(r.get("role")), r.get("event")
        if ev == "connected":
            if role in open_:
                b, t = open_.pop(role)
                out.append((role, b, t, r["ts"]))
            open_[role] = (r.get("broker"), r["ts"])
        elif (
            ev == "disconnected"
            and role in open_
            and not str(r.get("reason", "")).startswith("connect_failed")
        ):
            b, t = open_.pop(role)
            out.append((role, b, t, r["ts"]))
    out += [(role, b, t, float("inf")) for role, (b, t) in open_.items()]
    return out


def roles(v: RunView, agent: str) -> list[str]:
    wl = (v.agents.get(agent) or {}).get("workload") or {}
    roles = [f"subscriber:{s['topic']}" for s in wl.get("subscriptions") or [] if isinstance(s, dict)]
    return roles + (["publisher"] if wl.get("publications") else [])


def launched(v: RunView) -> dict[str, float]:
    return {str(k): float(t) for k, t in (v.observations.get("agents_launched_ts") or {}).items()}
