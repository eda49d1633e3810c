"""Overload is inconclusive, never the agent's fault (docs/verdict.md, "Overload").

The timing promises assume the harness and the brokers got the CPU they needed. The run loop
measures whether they did (RUN_DIR/load.jsonl, harness/contracts/loadlog.py); after the checkers
ran, the judge hands every failed gated timing promise to `apply`. Each of its violations is a
`Breach` its checker filled (checks/base.py): a time span [a, b] and the seconds past the bound
(for a rate, the seconds its attempts would need to spread over to fit the bound). A violation is
**explained by overload** when, over the samples of the part past the bound (from b - past - 1 s
to b + 1 s: the time the bound allows is never excused; a rate's whole span), either
- the worst delay (peak) is at least OVERLOADED_S (an overloaded moment overlaps the evidence) and
  the breach is at most the sum of those samples' delays (the time the overload took there), or
- (a lateness that needs CPU: QUEUED, not a rate) the run queue reached STARVED_PER_CORE runnable
  threads per core (load1 / cpus) and the breach is at most the delays plus what that queue can
  have taken from a runnable thread (loadlog.starved_s): a starved machine whose sleepers still
  wake on time.
What excuses is the machine's, never the agent's nor a broker's: each sample's delay is the
harness probe's and the fault proxy's (a broker slow to answer is the broker's finding), scaled by
the share of the CPUs the agent's own processes left (load.jsonl `agents_cpu_s`, every fleet
member's); the run queue is counted without the agent's own share of it (its CPU use averaged as
the kernel averages load1). An agent that starves the machine makes its own breaches fail.
A promise all of whose violations are explained becomes `unknown`, with the evidence ("machine
overloaded: scheduling delay 2.3 s at 12:01:07 UTC"); one violation not explained (a defect's
breach far beyond the measured overload, a `never`) keeps it `fail`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

from harness.contracts import loadlog
from harness.verdict.checks.base import Breach, Check
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
#: the latenesses a starved run queue can explain: work on the agent's and the brokers' CPU (a
#: handshake, a resubscription, a publish and its ack). Not `liveness`: noticing a dead broker is a
#: timer's wake-up, which the probe's oversleep measures; not the rates (bounded_retry, the storm's
#: attempts per second): a queue slows every thread alike and makes no agent retry more often.
QUEUED = ("recovery", "connect_timeout", "publish_latency", "fleet_recovery", "reconnect_storm")
RERUN = "re-run on a less loaded machine"
SLACK_S = 1.0  # samples are about a second apart
MAX_GAP_S = 5.0  # a sampler late by more than this is counted for this much (an upper estimate)
LOAD1_S = 60.0  # the time constant of the kernel's 1-minute load average


class Sample(NamedTuple):
    ts: float
    delay: float  # the worst of the probe's oversleep, the proxy's and the answering brokers'
    source: str
    starved: float  # what the run queue can have taken from a runnable thread since the last one
    load1: float | None
    cpus: float | None
    gap: float = SLACK_S  # the interval [ts - gap, ts] the sample's `starved` covers


class Explained(NamedTuple):
    ts: float
    weight: float  # to pick the evidence shown: the peak delay, or the run queue per core
    what: str


def delays(v: RunView) -> list[Sample]:
    """One Sample per line of load.jsonl: the machine's delay (no broker's), less the agent's share."""
    out: list[Sample] = []
    agent_avg = 0.0  # the agent's runnable share of load1: its cores, averaged as load1 is
    for row in loadlog.read(v.run_dir):
        ts = float(row["ts"])
        gap = min(MAX_GAP_S, ts - out[-1].ts) if out else SLACK_S
        brokers = row.get("brokers")
        d, src = loadlog.delay(row, brokers.keys() if isinstance(brokers, dict) else ())
        cpus = loadlog.num(row.get("cpus")) or 0.0
        agent = loadlog.agents_cores(row, gap)
        agent_avg += (agent - agent_avg) * (1.0 - math.exp(-max(gap, 0.0) / LOAD1_S))
        left = max(0.0, 1.0 - agent / cpus) if cpus > 0 else 1.0  # what the agent left the others
        load = loadlog.num(row.get("load1"))
        load = None if load is None else max(0.0, load - agent_avg)
        starved = loadlog.starved_s({**row, "load1": load}, gap)
        out.append(Sample(ts, d * left, src, starved, load, cpus or None, max(gap, 0.0)))
    return out


def explain(samples: list[Sample], b: Breach, queued: bool = True) -> Explained | None:
    """The overload that explains one violation, or None (`queued`: the run queue may)."""
    if not b.past_s > 0:  # not a time past a bound: nothing to explain
        return None
    start = b.start if b.rate else max(b.start, b.end - b.past_s)  # the bound's own time never
    inside = [s for s in samples if start - SLACK_S <= s.ts <= b.end + SLACK_S]
    if not inside:
        return None
    reach = sum(s.delay for s in inside)
    peak = max(inside, key=lambda s: s.delay)
    if peak.delay >= loadlog.OVERLOADED_S and b.past_s <= reach:
        what = f"scheduling delay {peak.delay:.1f} s at {loadlog.clock(peak.ts)} ({peak.source})"
        return Explained(peak.ts, peak.delay, what)
    if b.rate or not queued:  # a run queue explains no rate, nor a timer's lateness (QUEUED)
        return None
    starved = sum(_within(s, start, b.end) for s in inside)
    if not starved or b.past_s > reach + starved:
        return None
    q = max((s for s in inside if s.starved), key=lambda s: (s.load1 or 0.0) / (s.cpus or 1.0))
    load, cpus = q.load1 or 0.0, q.cpus or 1.0
    what = (
        f"run queue {load / cpus:.1f} per core (load average {load:.1f} on {cpus:g} cores) at "
        f"{loadlog.clock(q.ts)}: up to {starved:.1f} s taken from a runnable thread"
    )
    return Explained(q.ts, load / cpus, what)


def _within(s: Sample, a: float, b: float) -> float:
    """The part of the sample's starved time inside [a, b] (its interval clipped to them)."""
    if s.gap <= 0:
        return s.starved if a <= s.ts <= b else 0.0
    overlap = min(s.ts, b) - max(s.ts - s.gap, a)
    return s.starved * max(0.0, min(overlap, s.gap)) / s.gap


def judge_check(v: RunView, c: Check, samples: list[Sample]) -> Check:
    """`c` as the overload rule leaves it: unknown when every violation is explained (each read
    from the checker's `breaches`: one not read as a time past a bound keeps it a fail)."""
    if c.promise not in TIMING or c.status != "fail" or not samples:
        return c
    if not c.breaches or len(c.breaches) != c.count:
        return c
    found: list[tuple[Explained, Breach]] = []
    for b in c.breaches:
        x = explain(samples, b, c.promise in QUEUED) if b is not None else None
        if x is None or b is None:
            return c
        found.append((x, b))
    x, b = max(found, key=lambda f: f[0].weight)
    what = f"machine overloaded: {x.what}"
    detail = (
        f"{what}; all {c.count} violation(s) within the overload's reach (the worst breach "
        f"{max(f[1].past_s for f in found):.1f} s past the bound): {c.detail}; {RERUN}"
    )
    ev = [{"ts": round(x.ts, 3), "what": what}, *c.evidence]
    return dataclasses.replace(c, status="unknown", evidence=ev, detail=detail)


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
