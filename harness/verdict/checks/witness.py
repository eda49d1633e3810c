"""Checks against the brokers' own view (brokers/events.jsonl): a `subscribed` claim matched to a
consumer on the broker it names, and granted subscriptions the broker left without a consumer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.verdict.checks.base import BROKER_OUTAGES, Check, not_applicable, rounded, span_end, verdict_of
from harness.verdict.resubscribed import restored, sub_ids
from harness.verdict.view import RunView
from harness.verdict.witness import ABSENT_MIN_S, CLOCK_TOLERANCE_S, line_of
from harness.witness.events import topic_destination


@dataclass
class Life:
    """A granted subscription as the agent's log tells it: `subscribed` until its role lets go."""

    agent: str
    topic: str
    start: float
    end: float  # the role's next disconnected / connected, or inf
    member: str | None
    durable: bool
    record: dict[str, Any]


def _lets_go(x: dict[str, Any]) -> bool:
    """A record that ends its role's granted subscription: a new connection or a real disconnect."""
    return x.get("event") == "connected" or (
        x.get("event") == "disconnected" and not str(x.get("reason", "")).startswith("connect_failed")
    )


def lives(v: RunView) -> list[Life]:
    """Every `subscribed` until its role's next connect or disconnect: one backward pass per agent
    (linear in the log; scanning forward from each `subscribed` was quadratic, issue 34)."""
    out = []
    for agent, recs in v.records.items():
        ends: list[float] = [float("inf")] * len(recs)
        next_end: dict[Any, float] = {}
        for i in range(len(recs) - 1, -1, -1):
            x = recs[i]
            if x.get("event") == "subscribed":
                ends[i] = next_end.get(f"subscriber:{x.get('topic')}", float("inf"))
            if "role" in x and _lets_go(x):
                next_end[x.get("role")] = x["ts"]
        for i, r in enumerate(recs):
            if r.get("event") != "subscribed":
                continue
            end = ends[i]
            out.append(
                Life(
                    agent,
                    str(r.get("topic")),
                    float(r["ts"]),
                    float(end),
                    v.broker(r.get("broker")),
                    bool(r.get("durable", True)),
                    r,
                )
            )
    return out


def _ev(life: Life, what: str, **kw: Any) -> dict[str, Any]:
    return {
        "ts": rounded(life.start),
        "agent": life.agent,
        "broker": life.member,
        "source": "broker",
        "what": what,
        **kw,
    }


def observer_lag(v: RunView) -> tuple[float, int]:
    """(the largest, how many): the observer's latency this run, from each live consumer_added's
    `lag` (the advisory's broker timestamp to its arrival; harness/witness/Observer.java)."""
    lags = [float(r["lag"]) for r in v.broker_events if isinstance(r.get("lag"), int | float)]
    return (max(lags, default=0.0), len(lags))


def _at_fault_instant(v: RunView, member: str, t: float, tolerance: float) -> str | None:
    """A fault that hit `member` within the tolerance of a claim: its evidence is unknown."""
    for w in v.faults:
        if w.fault in BROKER_OUTAGES and member in v.affected_brokers(w) and abs(w.start - t) <= tolerance:
            return w.fault_id
    return None


def _frozen(v: RunView, member: str, t: float, tolerance: float) -> str | None:
    """A paused (SIGSTOP) member confirms nothing: a claim naming it well inside the pause."""
    for w in v.faults:
        if w.fault == "pause" and member in v.affected_brokers(w):
            end = w.end if w.end is not None else float("inf")
            if w.start + tolerance < t < end:
                return w.fault_id
    return None


def witnessed_subscriptions(v: RunView) -> tuple[list[dict[str, Any]], int, int]:
    """(violations, confirmed, unknown): each `subscribed` matched to a consumer on the member it
    names at some moment from the record to the record + the tolerance (CLOCK_TOLERANCE_S widened
    by this run's observer lag). A consumer there then confirms it even if a cut or a kill removed
    it at once (the false flags of issue 35); a fault on the member at the claim's instant leaves
    it unknown, as does a claim inside an observer gap on a member that was not down; a claim naming
    a paused member inside its pause is a violation."""
    w = v.witness
    bad: list[dict[str, Any]] = []
    ok = unknown = 0
    tolerance = CLOCK_TOLERANCE_S + observer_lag(v)[0]
    for life in lives(v):
        if life.member is None:
            unknown += 1
            continue
        ids, dest = sub_ids(v, life.agent, life.topic), topic_destination(life.topic)
        at = life.start + tolerance
        if w.seen_between(life.member, life.start, at, ids, dest):
            ok += 1
            continue
        frozen = _frozen(v, life.member, life.start, tolerance)
        if frozen is None and (
            _at_fault_instant(v, life.member, life.start, tolerance)
            # a consumer replayed without its client id (the observer never saw its connection)
            # may be this claim's: a reference subscriber was flagged so at a pause row
            or w.seen_between(life.member, life.start, at, {"None"}, dest)
        ):
            unknown += 1
            continue
        if (
            frozen is None
            and not w.down_reason(life.member, life.start)
            and (w.in_gap(life.member, life.start) or w.replaying(life.member, life.start))
        ):
            # claimed while the observer could not see the member, or as it subscribed: only its
            # replays could show the consumer (the re-snapshot's, seen above, confirms it), and the
            # first can miss one added meanwhile (soak round 4, issue 35)
            unknown += 1
            continue
        has = False if frozen else w.has_consumer(life.member, at, ids, dest)
        if has is None:
            unknown += 1
        elif has:
            ok += 1
        else:
            why = f"paused ({frozen}): it could confirm nothing" if frozen else w.down_reason(life.member, at)
            later = w.first_added(life.member, life.start, ids, dest)
            seen = (
                f"its first consumer came {float(later['ts']) - life.start:+.3f} s later"
                if later
                else "no consumer followed"
            )
            state = f"{life.member} was down: {why}" if why else f"{life.member} had no consumer of it"
            bad.append(
                _ev(
                    life,
                    f"subscribed {life.topic} at {rounded(life.start)} but {state} "
                    f"(tolerance {tolerance:.2f} s); {seen}",
                    lines=[line_of(later)] if later else [],
                )
            )
    return bad, ok, unknown


def broker_consumers(v: RunView) -> Check:
    """A subscription the broker granted but holds no consumer for (the link-stealing race): while
    the agent's connection stays up, the observer sees no consumer of it for ABSENT_MIN_S or more.
    A broker finding: its failures are blamed on the broker."""
    w = v.witness
    if not w.advisory:
        return not_applicable("broker_consumers", "no broker witness records (brokers/events.jsonl)")
    bad, judged = [], False
    for life in lives(v):
        if life.member is None:
            continue
        ids, dest = sub_ids(v, life.agent, life.topic), topic_destination(life.topic)
        gone = absent_from(v, life, ids, dest)
        judged = judged or gone is not None
        if not isinstance(gone, tuple):
            continue
        t0, t1 = gone
        stolen = w.stolen(life.member, ids, life.start - 30.0, t1)
        bad.append(
            {
                **_ev(
                    life,
                    f"{life.member} granted {life.topic} at {rounded(life.start)} yet held no consumer of it "
                    f"from {rounded(t0)} for {t1 - t0:.1f} s while the agent stayed connected"
                    + (f"; {len(stolen)} stolen link(s)" if stolen else ""),
                ),
                "ts": rounded(t0),
                "blame": "broker",
                "lines": [line_of(r) for r in stolen[:5]],
            }
        )
    if not judged:
        return not_applicable("broker_consumers", "no granted subscription the observer could see")
    c = verdict_of(
        "broker_consumers", bad, "SUBACK granted, no consumer on the broker (broker finding)", v.faults
    )
    c.blame = "broker" if bad else None
    return c


def absent_from(v: RunView, life: Life, ids: set[str] | None, dest: str) -> tuple[float, float] | None | bool:
    """The first stretch (≥ ABSENT_MIN_S, fully observed) in which the member had no consumer of a
    live subscription; False when it always had one where seen; None when never seen."""
    w = v.witness
    # bounded by the run's own times: a run without sends ends at its last record, never at an
    # open subscription's inf
    end = span_end(life.start, min(life.end, v.traffic_end() or v.run_end()))
    t, step, seen = life.start + CLOCK_TOLERANCE_S, 0.25, False
    run: float | None = None
    while t < end:
        has = (
            w.has_consumer(life.member or "", t, ids, dest)
            if not w.down_reason(life.member or "", t)
            else None
        )
        if has is None:
            run = None
        else:
            seen = True
            if has:
                run = None
                # every step while a consumer holds answers True or None: skip them (a fleet's lives
                # are thousands of steps each)
                held = w.held_until(life.member or "", t, ids, dest)
                while t + step < min(held, end):
                    t += step
            elif run is None:
                run = t
            elif t - run >= ABSENT_MIN_S:
                stop = t
                while stop < end and w.has_consumer(life.member or "", stop, ids, dest) is False:
                    stop += step
                return run, stop
        t += step
    return False if seen else None


def consumer_confirmed(v: RunView) -> Check:
    """Every `subscribed` claim matched to a consumer on the broker it names (brokers/events.jsonl,
    within the clock tolerance); an observer gap is unknown, never a pass or fail by silence."""
    seen, ok, unknown = witnessed_subscriptions(v)
    if not (seen or ok):
        return not_applicable(
            "consumer_confirmed", f"no claim the broker's view could judge ({unknown} unknown)"
        )
    c = verdict_of("consumer_confirmed", seen, "subscribed before the broker had the consumer", v.faults)
    lag, n = observer_lag(v)
    back = restored(v)  # restored sessions: confirmed by the witness alone, no claim to judge
    witness = (
        f"broker witness: {ok} confirmed, {len(seen)} before the consumer, {unknown} unknown"
        + (f", {len(back)} restored by the broker" if back else "")
        + "; "
        f"observer lag up to {lag:.2f} s ({n} advisories), tolerance {CLOCK_TOLERANCE_S + lag:.2f} s"
    )
    c.detail = f"{c.detail}; {witness}" if c.detail else witness
    return c
