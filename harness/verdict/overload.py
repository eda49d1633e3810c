"""Overload is inconclusive, never the agent's fault (docs/verdict.md, "Overload").

The timing promises assume the harness and the brokers got the CPU they needed. The run loop
measures whether they did (RUN_DIR/load.jsonl, harness/contracts/loadlog.py); after the checkers
ran, the judge hands every failed gated timing promise to `apply`. Each of its violations
(evidence items) is read as a time span [a, b] and a breach (seconds past the bound; for a rate,
the seconds its attempts would need to spread over to fit the bound). A violation is **explained
by overload** when, over the samples from a - 1 s to b + 1 s:
- the worst delay (peak) is at least OVERLOADED_S (an overloaded moment overlaps the evidence), and
- the breach is at most the sum of those samples' delays (the time the overload took there).
A promise all of whose violations shown are explained becomes `unknown`, with the evidence
("machine overloaded: scheduling delay 2.3 s at 12:01:07 UTC"); one violation not explained (a
defect's breach far beyond the measured delay, a `never`) keeps it `fail`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from harness.contracts import loadlog
from harness.verdict.checks.base import Check
from harness.verdict.view import RunView

#: the promises whose bounds are times or rates (the checkers' names, checks/__init__.py)
TIMING = (
    "liveness",
    "recovery",
    "connect_timeout",
    "publish_latency",
    "bounded_retry",
    "fleet_recovery",
    "reconnect_storm",
)
RERUN = "re-run on a less loaded machine"
SLACK_S = 1.0  # samples are about a second apart
AFTER_FAULT_S = 10.0  # a restarted or promoted broker's first answers are its start-up, not load

Span = tuple[float, float, float]  # (a, b, breach in seconds)
_NUM = r"([0-9]+(?:\.[0-9]+)?)"


def _f(m: re.Match[str] | None, i: int) -> float | None:
    return float(m.group(i)) if m else None


def _ts(e: dict[str, Any]) -> float | None:
    t = e.get("ts")
    return float(t) if isinstance(t, int | float) and not isinstance(t, bool) else None


def _window(v: RunView, fault_id: Any) -> Any:
    return next((w for w in v.faults if w.fault_id == fault_id), None)


def _liveness(v: RunView, e: dict[str, Any], ts: float) -> Span | None:
    m = re.search(rf"noticed after {_NUM} s \(bound {_NUM} s\)", str(e.get("what")))
    took, limit = _f(m, 1), _f(m, 2)
    return None if took is None or limit is None else (ts, ts + took, took - limit)


def _connect(v: RunView, e: dict[str, Any], ts: float) -> Span | None:
    m = re.search(rf"within {_NUM} s of launch.*first connection: {_NUM} s after launch", str(e.get("what")))
    grace, took = _f(m, 1), _f(m, 2)
    return None if grace is None or took is None else (ts, ts + took, took - grace)


def _latency(v: RunView, e: dict[str, Any], ts: float) -> Span | None:
    m = re.search(rf"acknowledged {_NUM} s after its first attempt \(bound {_NUM} s\)", str(e.get("what")))
    took, limit = _f(m, 1), _f(m, 2)
    return None if took is None or limit is None else (ts - took, ts, took - limit)


def _retry(v: RunView, e: dict[str, Any], ts: float) -> Span | None:
    m = re.search(rf"{_NUM} failed attempts in 5 s \(bound {_NUM}\)", str(e.get("what")))
    n, limit = _f(m, 1), _f(m, 2)
    if n is None or not limit:
        return None
    fails = sorted(
        r["ts"]
        for r in v.records.get(str(e.get("agent")), [])
        if r.get("event") == "disconnected"
        and str(r.get("role")) == str(e.get("role"))
        and str(r.get("reason", "")).startswith("connect_failed")
    )
    a = ts
    for i, t in enumerate(fails):  # the densest 5 s: the checker's worst window
        if i + int(n) - 1 < len(fails) and fails[i + int(n) - 1] - t <= 5.0:
            a = t
            break
    return a, a + 5.0, 5.0 * (n / limit - 1)  # the time these attempts would need to fit the bound


def _recovery(v: RunView, e: dict[str, Any], ts: float) -> Span | None:
    m = re.search(rf"not reconnected within {_NUM} s of the end", str(e.get("what")))
    limit = _f(m, 1)
    if limit is None:
        return None
    back = _back(v.records.get(str(e.get("agent")), []), str(e.get("role")), ts)
    return None if back is None else (ts, back, back - ts - limit)


def _back(recs: list[dict[str, Any]], role: str, since: float) -> float | None:
    """When a role was back after `since`, as the recovery checker counts it: a publisher
    connected again; a subscription subscribed again, or reconnected and receiving."""
    topic = role.removeprefix("subscriber:") if role.startswith("subscriber:") else None
    resumed = None
    for r in recs:
        if r["ts"] <= since:
            continue
        ev = r.get("event")
        if ev == "connected" and str(r.get("role")) == role:
            if topic is None:
                return float(r["ts"])
            resumed = resumed or r["ts"]
        elif topic is not None and (
            (ev == "subscribed" and r.get("topic") == topic)
            or (ev == "received" and resumed and r.get("subscription") == topic)
        ):
            return float(r["ts"])
    return None


def _fleet_recovery(v: RunView, e: dict[str, Any], ts: float) -> Span | None:
    m = re.search(rf"back {_NUM} s after the fault began \(bound: {_NUM} s after", str(e.get("what")))
    took, limit, w = _f(m, 1), _f(m, 2), _window(v, e.get("fault"))
    if took is None or limit is None or w is None or w.end is None:
        return None
    back = w.start + took
    return min(ts, w.start), back, back - w.end - limit


def _storm(v: RunView, e: dict[str, Any], ts: float) -> Span | None:
    what = str(e.get("what"))
    m = re.search(rf"{_NUM} connection attempts/s over {_NUM} s .*per role: {_NUM}/s\)", what)
    if m:
        rate, span, cap = float(m.group(1)), float(m.group(2)), float(m.group(3))
        return (ts - span, ts + span, span * (rate / cap - 1)) if cap else None
    m = re.search(rf"every agent back {_NUM} s after \S+ ended \(bound {_NUM} s\)", what)
    took, limit = _f(m, 1), _f(m, 2)
    return None if took is None or limit is None else (ts, ts + took, took - limit)


#: promise -> reader of one violation's span and breach (None: not a timing breach, e.g. `never`)
SPANS: dict[str, Callable[[RunView, dict[str, Any], float], Span | None]] = {
    "liveness": _liveness,
    "connect_timeout": _connect,
    "publish_latency": _latency,
    "bounded_retry": _retry,
    "recovery": _recovery,
    "fleet_recovery": _fleet_recovery,
    "reconnect_storm": _storm,
}


def _skipped(v: RunView) -> list[tuple[float, float, set[str]]]:
    """(from, to, brokers) whose answers are a fault's, not the machine's: the targets and their
    groups' members (a takeover) from a fault's start to AFTER_FAULT_S past its end."""
    group_of = {b: g for g, bs in v.groups.items() for b in bs}
    out = []
    for w in v.faults:
        hit = v.affected_brokers(w)
        members = {b for h in hit for b in v.groups.get(group_of.get(h, ""), [h])} | hit
        end = w.end if w.end is not None else float("inf")
        out.append((w.start - SLACK_S, end + AFTER_FAULT_S, members))
    return out


def delays(v: RunView) -> list[tuple[float, float, str]]:
    """(ts, delay, source) per sample of the run, brokers under a fault left out."""
    skipped = _skipped(v)
    out = []
    for row in loadlog.read(v.run_dir):
        ts = float(row["ts"])
        skip = set().union(*(bs for lo, hi, bs in skipped if lo <= ts <= hi))
        d, src = loadlog.delay(row, skip)
        out.append((ts, d, src))
    return out


def explain(samples: list[tuple[float, float, str]], span: Span) -> tuple[float, float, str] | None:
    """The overload that explains one violation: (peak ts, peak delay, source), or None."""
    a, b, breach = span
    if not breach > 0:  # not a time past a bound as read: nothing to explain
        return None
    inside = [s for s in samples if a - SLACK_S <= s[0] <= b + SLACK_S]
    if not inside:
        return None
    peak = max(inside, key=lambda s: s[1])
    if peak[1] < loadlog.OVERLOADED_S or breach > sum(s[1] for s in inside):
        return None
    return peak


def judge_check(v: RunView, c: Check, samples: list[tuple[float, float, str]]) -> Check:
    """`c` as the overload rule leaves it: unknown when every violation shown is explained."""
    reader = SPANS.get(c.promise)
    if reader is None or c.status != "fail" or not c.evidence or not samples:
        return c
    peaks: list[tuple[tuple[float, float, str], Span]] = []
    for e in c.evidence:
        ts = _ts(e)
        span = reader(v, e, ts) if ts is not None else None
        peak = explain(samples, span) if span is not None else None
        if peak is None or span is None:
            return c
        peaks.append((peak, span))
    (t, d, src), (_, _, breach) = max(peaks, key=lambda p: p[0][1])
    shown = f"{len(c.evidence)} of {c.count}" if c.count > len(c.evidence) else f"all {c.count}"
    what = f"machine overloaded: scheduling delay {d:.1f} s at {loadlog.clock(t)} ({src})"
    ev = [{"ts": round(t, 3), "what": what}, *c.evidence]
    detail = (
        f"{what}; {shown} violation(s) within the overload's reach (the worst breach "
        f"{breach:.1f} s past the bound): {c.detail}; {RERUN}"
    )
    return Check(c.promise, "unknown", c.count, ev, c.fault, detail, c.blame, c.measures)


def apply(v: RunView, checks: list[Check], gates: list[str]) -> tuple[list[Check], list[str]]:
    """The checks with every gated timing promise that overload explains made `unknown`, and the
    promises so changed."""
    if not any(c.promise in TIMING and c.promise in gates and c.status == "fail" for c in checks):
        return checks, []
    samples = delays(v)
    out, changed = [], []
    for c in checks:
        if c.promise in TIMING and c.promise in gates:
            new = judge_check(v, c, samples)
            if new is not c:
                changed.append(c.promise)
            c = new
        out.append(c)
    return out, changed


def note(overloaded: list[str]) -> str:
    """The verdict's note when overload left it `unknown`."""
    return f"timing promise(s) {overloaded} inconclusive: the machine was overloaded; {RERUN}"
