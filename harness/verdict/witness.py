"""The brokers' own view for the checkers (brokers/events.jsonl, harness.witness.events).

`BrokerView` answers "did member M have a consumer for this subscription at time t?" with True,
False or None (unknown). It is False only on evidence: the observer saw M without that consumer, or
M could have no consumer at all (killed or stopped per faults.jsonl and not restarted; a slave
waiting for the store lock per broker.log). An observer gap with nothing else known is None.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from harness.witness import events as ev

#: `subscribed` may precede the observer's consumer_added by this much: the skew is ~0.02 s on a
#: quiet machine, but the advisory reaches the observer up to 0.7 s late on a loaded one (seen at a
#: load average of 15-30 with three test workers): docs/verdict.md
CLOCK_TOLERANCE_S = 2.0
#: a consumer missing this long while the agent holds a granted subscription is a broker finding
ABSENT_MIN_S = 3.0
SNAPSHOT_S = 1.0  # the observer marks what arrives this long after a (re)connect as a snapshot


@dataclass
class _Member:
    gaps: list[tuple[float, float]] = field(default_factory=list)  # observer gaps [start, end)
    consumers: dict[tuple[str, str], list[tuple[float, float, dict[str, Any]]]] = field(
        default_factory=dict
    )  # (client id, destination) -> [added, removed) with the added record
    by_dest: dict[str, dict[str, list[tuple[float, float, dict[str, Any]]]]] = field(
        default_factory=dict
    )  # destination -> client id -> the same span lists: a fleet's queries name a few ids of 1,000s
    down: list[tuple[float, float, str]] = field(default_factory=list)  # could serve nobody
    started: list[float] = field(default_factory=list)  # broker_started times (became master)


class BrokerView:
    def __init__(self, records: list[dict[str, Any]], down: dict[str, list[tuple[float, float, str]]]):
        self.records = sorted(records, key=lambda r: float(r["ts"]))
        self.members: dict[str, _Member] = {}
        # event -> its records and their times, in time order: blame asks per lost delivery (a
        # fleet's 12,000 losses made a scan of every record each the judge's longest part)
        self._by_event: dict[str, tuple[list[float], list[dict[str, Any]]]] = {}
        for r in self.records:
            ts, rows = self._by_event.setdefault(r["event"], ([], []))
            ts.append(float(r["ts"]))
            rows.append(r)
        self.advisory = any(r.get("source", "advisory") == "advisory" for r in self.records)
        for r in self.records:
            self._add(r)
        for m in self.members.values():
            self._close(m, float("inf"))
        for b, spans in down.items():
            self.member(b).down.extend(spans)
        self._slave_spans()

    def member(self, b: str) -> _Member:
        return self.members.setdefault(b, _Member())

    # -- building ----------------------------------------------------------------------------
    def _add(self, r: dict[str, Any]) -> None:
        m, t, e = self.member(str(r["broker"])), float(r["ts"]), r["event"]
        if e == ev.GAP_START:
            self._close(m, t)
            m.gaps.append((t, float("inf")))
        elif e == ev.GAP_END:
            if m.gaps and m.gaps[-1][1] == float("inf"):
                m.gaps[-1] = (m.gaps[-1][0], t)
        elif e == ev.CONSUMER_ADDED and not r.get("network"):
            key = (str(r.get("client_id")), ev.served_topic(r.get("destination")))
            if key not in m.consumers:
                m.consumers[key] = m.by_dest.setdefault(key[1], {})[key[0]] = []
            m.consumers[key].append((t, float("inf"), r))
        elif e == ev.CONSUMER_REMOVED:
            key = (str(r.get("client_id")), ev.served_topic(r.get("destination")))
            spans = m.consumers.get(key) or []
            for i in range(len(spans) - 1, -1, -1):
                if spans[i][1] == float("inf"):
                    spans[i] = (spans[i][0], t, spans[i][2])
                    break
        elif e == ev.BROKER_STARTED:
            m.started.append(t)

    @staticmethod
    def _close(m: _Member, t: float) -> None:
        for spans in m.consumers.values():
            for i, (a, b, r) in enumerate(spans):
                if b == float("inf"):
                    spans[i] = (a, t, r)

    def _slave_spans(self) -> None:
        """A member waiting for the store lock serves no client until it logs broker_started."""
        waits: dict[str, list[float]] = {}
        for r in self.log_events(ev.LOCK_WAITING, t0=float("-inf")):
            waits.setdefault(str(r["broker"]), []).append(float(r["ts"]))
        for b, ts in waits.items():
            m = self.member(b)
            for t in ts:
                nxt = min((s for s in m.started if s > t), default=float("inf"))
                m.down.append((t, nxt, "slave waiting for the store lock"))

    # -- queries -----------------------------------------------------------------------------
    def down_reason(self, broker: str, ts: float) -> str | None:
        return next((why for a, b, why in self.member(broker).down if a <= ts < b), None)

    def in_gap(self, broker: str, ts: float) -> bool:
        return any(a <= ts < b for a, b in self.member(broker).gaps) or not self.member(broker).gaps

    def replaying(self, broker: str, ts: float) -> bool:
        """Within SNAPSHOT_S after a gap's end: the observer's replay of the broker's state is still
        arriving, and a consumer added as it subscribed can be missing from it (soak round 4)."""
        return any(b <= ts < b + SNAPSHOT_S for _, b in self.member(broker).gaps)

    def has_consumer(self, broker: str, ts: float, ids: set[str] | None, destination: str) -> bool | None:
        """None: unknown (observer gap, or no advisory records at all)."""
        if self.down_reason(broker, ts):
            return False
        if not self.advisory or self.in_gap(broker, ts):
            return None
        if self.consumers(broker, ts, ids, destination):
            return True
        # replays of what existed before the observer (re)connected arrive after its gap_end; a
        # re-replay's find (`resnapshot`: missed by the first replay) existed since some time before
        nxt = self.first_added(broker, ts, ids, destination)
        if nxt and nxt.get("snapshot"):
            ends = [b for a, b in self.member(broker).gaps if b <= ts]
            if ends and (nxt.get("resnapshot") or float(nxt["ts"]) - max(ends) <= SNAPSHOT_S):
                return None
        return False

    def consumers(
        self, broker: str, ts: float, ids: set[str] | None, destination: str
    ) -> list[dict[str, Any]]:
        return [r for _, _, r in self._holding(broker, ts, ids, destination)]

    def held_until(self, broker: str, ts: float, ids: set[str] | None, destination: str) -> float:
        """The end of the longest consumer span holding at `ts` (ts itself when none does)."""
        return max((b for _, b, _ in self._holding(broker, ts, ids, destination)), default=ts)

    def _holding(
        self, broker: str, ts: float, ids: set[str] | None, destination: str
    ) -> list[tuple[float, float, dict[str, Any]]]:
        """The consumer spans that hold at `ts`."""
        return [s for spans in self._spans(broker, ids, destination) for s in spans if s[0] <= ts < s[1]]

    def _spans(
        self, broker: str, ids: set[str] | None, destination: str
    ) -> list[list[tuple[float, float, dict[str, Any]]]]:
        """The consumer spans of `destination` on the member, of the client ids `ids` (None: any)."""
        by = self.member(broker).by_dest.get(ev.served_topic(destination), {})
        if ids is None:
            return list(by.values())
        return [by[cid] for cid in ids if cid in by]

    def seen_between(self, broker: str, t0: float, t1: float, ids: set[str] | None, destination: str) -> bool:
        """Whether the member had a consumer of it at some moment in [t0, t1] (the observer saw it)."""
        return any(
            a <= t1 and b >= t0 for spans in self._spans(broker, ids, destination) for a, b, _ in spans
        )

    def first_added(
        self, broker: str, after: float, ids: set[str] | None, destination: str
    ) -> dict[str, Any] | None:
        rows = [r for spans in self._spans(broker, ids, destination) for a, _, r in spans if a >= after]
        return min(rows, key=lambda r: float(r["ts"]), default=None)

    def first_added_between(
        self, broker: str, t0: float, t1: float, ids: set[str] | None, destination: str
    ) -> float | None:
        """When the first consumer of it was added on the member in [t0, t1] (a replay after an
        observer gap counts at its arrival); None when none was."""
        starts = [a for spans in self._spans(broker, ids, destination) for a, _, _ in spans if t0 <= a <= t1]
        return min(starts, default=None)

    def log_events(
        self, event: str, broker: str | None = None, t0: float = 0.0, t1: float = float("inf")
    ) -> list[dict[str, Any]]:
        ts, rows = self._by_event.get(event, ([], []))
        window = rows[bisect.bisect_left(ts, t0) : bisect.bisect_right(ts, t1)]
        return window if broker is None else [r for r in window if r["broker"] == broker]

    def stolen(self, broker: str, ids: set[str] | None, t0: float, t1: float) -> list[dict[str, Any]]:
        return [
            r
            for r in self.log_events(ev.LINK_STOLEN, broker, t0, t1)
            if ids is None or r.get("client_id") in ids
        ]

    def master_at(self, members: list[str], ts: float) -> str | None:
        """The member that last became master (broker_started) at or before `ts`."""
        best: tuple[float, str] | None = None
        for b in members:
            starts = self.member(b).started
            i = bisect.bisect_right(starts, ts)
            if i and (best is None or starts[i - 1] > best[0]):
                best = (starts[i - 1], b)
        return best[1] if best else None


def line_of(r: dict[str, Any]) -> str:
    """One evidence line for a broker event (the broker.log line where there is one)."""
    if r.get("line"):
        return f"{r['broker']}: {str(r['line'])[:240]}"
    keys = ("client_id", "destination", "reason")
    ids = " ".join(f"{k}={r[k]}" for k in keys if r.get(k))
    return f"{r['broker']}: {r['event']} {ids}".strip()
