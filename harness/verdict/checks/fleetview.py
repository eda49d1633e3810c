"""A fleet's figures from one run folder: per-agent recovery, the reconnect storm at the brokers,
deliveries per agent. The fleet promises (checks/fleet.py) judge them; the report draws them.

Only fleet members (harness/agents/fleet.py: `fleet-<group>-<i>`) count; the controllers are judged by
the other promises like any agent.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from harness.agents.fleet import is_member
from harness.contracts.faultlog import Window
from harness.verdict.checks.base import BROKER_OUTAGES, roles
from harness.verdict.resubscribed import back_at
from harness.verdict.view import RunView
from spark_analysis.percentile import nearest_rank

BUCKET_S = 0.1  # the storm's time resolution (the fault proxy counts per 0.1 s)
_QUIET_REASONS = ("connect_failed", "publications_complete", "shutdown")


@dataclass
class Recovery:
    agent: str
    role: str
    fault: str
    lost_ts: float  # the role's disconnect in the fault window
    back_ts: float | None  # resubscribed.back_at: subscribed again or restored, or connected again
    start: float  # the fault window's start and end (service back)
    end: float | None

    @property
    def took_s(self) -> float | None:
        """From the fault's start to the role being back: what the agent's users felt."""
        return None if self.back_ts is None else self.back_ts - self.start

    @property
    def after_end_s(self) -> float | None:
        """From the fault's end (a broker serving again) to the role being back."""
        if self.back_ts is None or self.end is None:
            return None
        return max(0.0, self.back_ts - self.end)


@dataclass
class FleetView:
    v: RunView
    members: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, v: RunView) -> FleetView | None:
        """None unless the run is a fleet (run.json scenario params `fleet`, members' logs)."""
        if not v.params.get("fleet"):
            return None
        members = sorted(a for a in set(v.agents) | set(v.records) if is_member(a))
        return cls(v, members) if members else None

    @cached_property
    def windows(self) -> list[Window]:
        """The fault windows that take a broker's service away (kill, stop, pause, partition...)."""
        return [w for w in self.v.faults if w.fault in BROKER_OUTAGES]

    @cached_property
    def roles(self) -> int:
        return sum(len(roles(self.v, a)) for a in self.members)

    # -- recovery ---------------------------------------------------------------------------------
    @cached_property
    def recoveries(self) -> list[Recovery]:
        out: list[Recovery] = []
        for w in self.windows:
            horizon = (w.end if w.end is not None else self.v.traffic_end()) + 0.5
            for agent in self.members:
                recs = self.v.records.get(agent, [])
                lost: dict[str, float] = {}
                for r in recs:
                    if (
                        r.get("event") == "disconnected"
                        and w.start - 0.2 <= r["ts"] <= horizon
                        and not str(r.get("reason", "")).startswith(_QUIET_REASONS)
                    ):
                        lost.setdefault(str(r.get("role")), r["ts"])
                last_publish = max(
                    (r["ts"] for r in recs if r.get("event") in ("send_attempt", "dropped")), default=0.0
                )
                for role, t in lost.items():
                    if role == "publisher" and last_publish <= t:
                        continue  # nothing left to publish: a publisher need not come back
                    back = back_at(self.v, agent, role, t)
                    out.append(
                        Recovery(agent, role, w.fault_id, t, back.ts if back else None, w.start, w.end)
                    )
        return out

    def took(self) -> list[float]:
        return [t for r in self.recoveries if (t := r.took_s) is not None]

    def distribution(self) -> dict[str, Any]:
        xs = self.took()
        if not xs:
            return {"n": 0}
        return {
            "n": len(xs),
            "p50": round(nearest_rank(xs, 50), 2),
            "p95": round(nearest_rank(xs, 95), 2),
            "max": round(max(xs), 2),
            "never": sum(1 for r in self.recoveries if r.back_ts is None),
        }

    def slowest(self, n: int = 5) -> list[Recovery]:
        worst: dict[str, Recovery] = {}
        for r in self.recoveries:
            key = float("inf") if r.took_s is None else r.took_s
            cur = worst.get(r.agent)
            if cur is None or key > (float("inf") if cur.took_s is None else cur.took_s):
                worst[r.agent] = r
        return sorted(worst.values(), key=lambda r: -(r.took_s if r.took_s is not None else 1e9))[:n]

    # -- the storm, from the brokers' side ---------------------------------------------------------
    @cached_property
    def proxy_accepts(self) -> dict[str, Counter[int]]:
        """broker -> connections the fault proxy accepted on its client links, per 0.1 s bucket."""
        raw = self.v.observations.get("proxy_connections") or {}
        out: dict[str, Counter[int]] = {}
        try:
            scale = float(raw.get("bucket_s", BUCKET_S)) / BUCKET_S
            for link, rows in (raw.get("proxies") or {}).items():
                broker = self.v.link_broker.get(str(link))
                if broker is None:
                    continue  # a bridge link: not the fleet's
                c = out.setdefault(broker, Counter())
                for bucket, n in rows:
                    c[int(int(bucket) * scale)] += int(n)
        except (TypeError, ValueError, AttributeError):
            return {}
        return out

    @cached_property
    def refused(self) -> Counter[int]:
        """Attempts the members logged as failed per 0.1 s bucket: refused before any listener
        (the proxy mirrors a broker that does not listen by not listening itself)."""
        c: Counter[int] = Counter()
        for a in self.members:
            for r in self.v.records.get(a, []):
                if r.get("event") == "disconnected" and str(r.get("reason", "")).startswith("connect_failed"):
                    c[int(r["ts"] / BUCKET_S)] += 1
        return c

    @cached_property
    def attempts(self) -> Counter[int]:
        """Connection attempts per 0.1 s bucket: accepted at the proxy plus refused before it."""
        c: Counter[int] = Counter(self.refused)
        for per in self.proxy_accepts.values():
            c.update(per)
        return c

    def peak_per_s(self, window_s: float = 1.0) -> tuple[float, float]:
        """(attempts per second over the busiest `window_s`, its start time)."""
        n, at = _peak(self.attempts, round(window_s / BUCKET_S))
        return n / window_s, at

    @cached_property
    def broker_connections(self) -> dict[str, Counter[int]]:
        """broker -> connections the broker itself saw opened (witness advisories) per second."""
        out: dict[str, Counter[int]] = {}
        for e in self.v.broker_events:
            if e.get("event") == "connection_added" and not e.get("snapshot"):
                out.setdefault(str(e.get("broker")), Counter())[int(float(e["ts"]))] += 1
        return out

    def all_back(self) -> list[tuple[Window, float | None]]:
        """Per fault window: seconds from its end until the last member's role was back (None:
        some role never came back)."""
        out: list[tuple[Window, float | None]] = []
        for w in self.windows:
            rs = [r for r in self.recoveries if r.fault == w.fault_id]
            if not rs:
                continue
            if any(r.back_ts is None for r in rs):
                out.append((w, None))
            else:
                out.append((w, max(r.after_end_s or 0.0 for r in rs)))
        return out

    # -- deliveries ----------------------------------------------------------------------------------
    @cached_property
    def deliveries(self) -> dict[str, int]:
        return {
            a: sum(1 for r in self.v.records.get(a, []) if r.get("event") == "received") for a in self.members
        }

    def median_deliveries(self) -> float:
        return statistics.median(self.deliveries.values()) if self.deliveries else 0.0


def _peak(c: Counter[int], width: int) -> tuple[float, float]:
    if not c:
        return 0.0, 0.0
    keys = sorted(c)
    best, at, lo, total = 0, keys[0], 0, 0
    for k in keys:  # sliding window over the sparse buckets
        total += c[k]
        while keys[lo] <= k - width:
            total -= c[keys[lo]]
            lo += 1
        if total > best:
            best, at = total, keys[lo]
    return float(best), at * BUCKET_S
