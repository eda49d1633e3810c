"""One message's journey through the brokers, read from the broker's account (brokers/account.jsonl).

`Account.load(run_dir, msg_ids)` indexes the run's consumers, connections and durable
subscriptions, and the records of the asked messages only (a fleet's account holds millions).
`Account.hop(...)` says where an expected delivery ended, with the records that show it:

- `never_arrived`: no broker recorded its arrival;
- `not_forwarded`: it arrived on another group's broker and never reached the subscriber's group;
- `not_dispatched`: it reached the subscriber's group and was never dispatched to its consumer;
- `not_acked`: dispatched to the subscriber's consumer, never acked by the client (in doubt);
- `acked`: dispatched and acked by the client (the agent's, if its log says it never came);
- `gap`: the account cannot tell (a member without an account, or records the plugin dropped).

The subscriber's consumers are found by client id only, never by destination.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.contracts import brokeraccount as ba

INF = math.inf
GAP_S = 2.0  # records dropped this close to a message's time may be its own
REACTIVATION_S = 2.0  # a durable consumer added this close to an arrival races it
VIRTUAL_QUEUE = re.compile(r"^queue://Consumer\.[^.]+\.VirtualTopic\.")
HOPS = ("never_arrived", "not_forwarded", "not_dispatched", "not_acked", "acked", "gap")


@dataclass
class Consumer:
    cid: str
    broker: str
    client_id: str | None
    conn: str | None
    dest: str | None
    subscription: str | None
    durable: bool
    network: bool
    added: float
    removed: float = INF
    gone: float = INF  # its connection removed
    gone_error: str | None = None
    died: float = INF  # its broker replaced: a master started in its group after it (a kill leaves no record)

    @property
    def end(self) -> float:
        return min(self.removed, self.gone, self.died)

    @property
    def removed_by_broker(self) -> float:
        """When the broker itself removed it (the consumer or its connection), not its death."""
        return min(self.removed, self.gone)

    def attached(self, t0: float, t1: float | None = None) -> bool:
        """Attached at some time in [t0, t1] (at t0 alone without t1)."""
        return self.added <= (t0 if t1 is None else t1) and self.end > t0

    def line(self) -> str:
        kind = f"durable subscription {self.subscription!r}" if self.durable else "no durable subscription"
        where = f"{self.client_id} on {self.broker} ({self.dest}, {kind})"
        return f"consumer {self.cid} of {where} added {self.added:.3f}"


@dataclass
class Hop:
    hop: str
    lines: list[str] = field(default_factory=list)  # the broker records it rests on, as text
    broker: str | None = None  # where the message ended
    consumer: Consumer | None = None  # the subscriber's consumer concerned, if any
    facts: dict[str, Any] = field(default_factory=dict)  # the mechanism's times (races read these)


def _group_of(groups: dict[str, str], broker: str | None) -> str | None:
    return groups.get(broker or "", broker)


def rec_line(r: dict[str, Any]) -> str:
    """A record as evidence: `broker ts event key=value ...` (the account's own words)."""
    keys = ("msg_id", "mid", "cid", "client_id", "dest", "via_broker", "subscription", "error", "type")
    rest = " ".join(f"{k}={r[k]}" for k in keys if r.get(k) not in (None, ""))
    return f"[account {r.get('broker')} {float(r.get('ts', 0)):.3f} {r.get('event')}] {rest}"


class Account:
    def __init__(self, groups: dict[str, str]) -> None:
        self.groups = groups  # member -> group
        self.consumers: dict[str, Consumer] = {}
        self.by_client: dict[str, list[Consumer]] = {}
        self.network: list[Consumer] = []
        self.messages: dict[str, list[dict[str, Any]]] = {}
        self.deleted: list[dict[str, Any]] = []
        self.unavailable: dict[str, str] = {}
        self.dropped: list[dict[str, Any]] = []
        self.started: list[tuple[str | None, float]] = []  # (group, ts) of each broker_started

    # -- reading ---------------------------------------------------------------------------------
    @classmethod
    def load(
        cls, run_dir: str | Path, groups: dict[str, str], msg_ids: Iterable[str] | None = None
    ) -> Account | None:
        """The run's account, with the records of `msg_ids` (all messages when None); None when the
        run folder has none (made before the account, or never collected)."""
        gaps = ba.gaps(run_dir)
        if gaps is None:
            return None
        acc = cls(groups)
        acc.unavailable = {str(k): str(v) for k, v in (gaps.get("unavailable") or {}).items()}
        acc.dropped = [d for d in gaps.get("dropped") or [] if isinstance(d, dict)]
        wanted = None if msg_ids is None else {str(m) for m in msg_ids}
        conns: dict[str, tuple[float, str | None]] = {}
        path = Path(run_dir) / "brokers" / ba.FILE
        if not path.exists():
            return acc
        with path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                if wanted is not None and '"msg_id":"' in line:
                    i = line.find('"msg_id":"') + 10
                    if line[i : line.find('"', i)] not in wanted:
                        continue
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if isinstance(r, dict):
                    acc._add(r, wanted, conns)
        for c in acc.consumers.values():
            gone = conns.get(f"{c.broker}|{c.conn}")
            if gone is not None and gone[0] >= c.added:
                c.gone, c.gone_error = gone
            group = _group_of(groups, c.broker)
            c.died = min((t for g, t in acc.started if g == group and t > c.added), default=INF)
        return acc

    def _add(
        self, r: dict[str, Any], wanted: set[str] | None, conns: dict[str, tuple[float, str | None]]
    ) -> None:
        ev, ts, broker = r.get("event"), r.get("ts"), str(r.get("broker"))
        if not isinstance(ts, int | float):
            return
        if ev in ba.MESSAGE_EVENTS:
            mid = r.get("msg_id")
            if mid is not None and (wanted is None or str(mid) in wanted):
                self.messages.setdefault(str(mid), []).append(r)
        elif ev == ba.CONSUMER_ADDED:
            c = Consumer(
                str(r.get("cid")),
                broker,
                r.get("client_id"),
                r.get("conn"),
                r.get("dest"),
                r.get("subscription"),
                # a virtual topic's consumer queue (mqtt-virtual-topic-subscriptions) keeps what
                # its subscription misses as a durable subscription does: no name, still durable
                bool(r.get("durable")) or bool(VIRTUAL_QUEUE.match(str(r.get("dest")))),
                bool(r.get("network")),
                float(ts),
            )
            self.consumers[f"{broker}|{c.cid}"] = c
            if c.network:
                self.network.append(c)
            elif c.client_id is not None:
                self.by_client.setdefault(str(c.client_id), []).append(c)
        elif ev == ba.CONSUMER_REMOVED:
            c2 = self.consumers.get(f"{broker}|{r.get('cid')}")
            if c2 is not None and c2.removed == INF:
                c2.removed = float(ts)
        elif ev == ba.CONNECTION_REMOVED:
            conns.setdefault(f"{broker}|{r.get('conn')}", (float(ts), r.get("error")))
        elif ev == ba.SUBSCRIPTION_DELETED:
            self.deleted.append(r)
        elif ev == ba.BROKER_STARTED:
            self.started.append((_group_of(self.groups, broker), float(ts)))

    # -- questions -------------------------------------------------------------------------------
    def gap(self, brokers: Iterable[str | None], t: float | None) -> str | None:
        """Why the account cannot tell for these members around t, or None."""
        for b in brokers:
            if b is not None and b in self.unavailable:
                return f"{b} ran without a broker account ({self.unavailable[b]})"
        if self.unavailable and not any(b for b in brokers):
            return "members ran without a broker account: " + ", ".join(sorted(self.unavailable))
        for d in self.dropped:
            near = t is None or abs(float(d.get("ts", 0)) - t) <= GAP_S
            if near and (d.get("broker") in brokers or not any(brokers)):
                return f"{d.get('broker')} dropped {d.get('dropped')} account records at {float(d['ts']):.3f}"
        return None

    def durable_sub(
        self, client_id: str, group: str | None, t: float
    ) -> tuple[Consumer | None, dict[str, Any] | None]:
        """The durable subscription of `client_id` on `group`'s store at t: the last durable consumer
        added before t, unless a deletion of its subscription came between (then that record)."""
        before = [
            c
            for c in self.by_client.get(client_id, [])
            if c.durable and c.added <= t and _group_of(self.groups, c.broker) == group
        ]
        if not before:
            return None, None
        last = max(before, key=lambda c: c.added)
        for d in self.deleted:
            same = d.get("client_id") == client_id and _group_of(self.groups, str(d.get("broker"))) == group
            if (
                same
                and last.added <= float(d["ts"]) <= t
                and d.get("subscription") in (None, last.subscription)
            ):
                return None, d
        return last, None

    def hop(self, msg_id: str, client_ids: set[str]) -> Hop:
        """Where the delivery of `msg_id` to the subscription whose client ids are `client_ids` ended."""
        recs = sorted(self.messages.get(msg_id, []), key=lambda r: float(r["ts"]))
        arrivals = [r for r in recs if r.get("event") == ba.ARRIVED]
        if not arrivals:
            why = self.gap([], None)
            if why:
                return Hop("gap", [why])
            return Hop("never_arrived", [f"no broker recorded the arrival of {msg_id}"])
        first = arrivals[0]
        t0 = float(first["ts"])
        mine = [c for cid in client_ids for c in self.by_client.get(cid, [])]
        by_key = {f"{c.broker}|{c.cid}": c for c in mine}
        dispatched = [
            r for r in recs if r.get("event") == ba.DISPATCHED and f"{r['broker']}|{r.get('cid')}" in by_key
        ]
        acked = {f"{r['broker']}|{r.get('cid')}": r for r in recs if r.get("event") == ba.ACKED}
        base = [rec_line(first)]
        for d in dispatched:
            a = acked.get(f"{d['broker']}|{d.get('cid')}")
            if a is not None:
                c = by_key[f"{d['broker']}|{d.get('cid')}"]
                return Hop(
                    "acked", [*base, rec_line(d), rec_line(a)], d["broker"], c, {"acked": float(a["ts"])}
                )
        if dispatched:
            d = dispatched[-1]
            c = by_key[f"{d['broker']}|{d.get('cid')}"]
            lines = [*base, rec_line(d)]
            if c.end < INF:
                what = "its connection removed" if c.gone <= c.removed else "the consumer removed"
                err = f" ({c.gone_error})" if c.gone_error and c.gone <= c.removed else ""
                lines.append(f"no ack from {c.client_id}; {what} at {c.end:.3f}{err}")
            facts = {"dispatched": float(d["ts"]), "gone": c.end, "error": c.gone_error}
            return Hop("not_acked", lines, d["broker"], c, facts)
        if not mine:
            why = self.gap([first.get("broker")], t0)
            return Hop(
                "gap" if why else "not_dispatched",
                [*base, why or f"no broker ever had a consumer of client id {', '.join(sorted(client_ids))}"],
                str(first["broker"]),
                None,
                {"no_consumer_ever": True},
            )
        return self._held(arrivals, mine, recs)

    def _held(self, arrivals: list[dict[str, Any]], mine: list[Consumer], recs: list[dict[str, Any]]) -> Hop:
        """Never dispatched to the subscriber: where the broker held it, and what the subscription
        was there (the group serving it: where its consumer was at, or next after, the arrival)."""
        first = arrivals[0]
        t0 = float(first["ts"])
        base = [rec_line(first)]
        at = [c for c in mine if c.attached(t0)]
        later = sorted((c for c in mine if c.added > t0), key=lambda c: c.added)
        earlier = sorted((c for c in mine if c.added <= t0), key=lambda c: c.added)
        serving = at[0] if at else (earlier[-1] if earlier else later[0])
        group = _group_of(self.groups, serving.broker)
        here = [r for r in arrivals if _group_of(self.groups, str(r["broker"])) == group]
        why = self.gap([first.get("broker"), serving.broker], t0)
        if why:
            return Hop("gap", [*base, why], str(first["broker"]), serving)
        if not here:
            return self._not_forwarded(first, group, serving, recs)
        arr = here[0]
        ta = float(arr["ts"])
        lines = [rec_line(arr)] if arr is not first else base
        attached = [c for c in mine if _group_of(self.groups, c.broker) == group and c.attached(ta)]
        if attached:
            c = attached[0]
            facts = {"arrived": ta, "attached": True}
            react = [
                x
                for x in mine
                if x.durable
                and _group_of(self.groups, x.broker) == group
                and abs(x.added - ta) <= REACTIVATION_S
            ]
            if react:
                facts["reactivated"] = react[0].added
            return Hop(
                "not_dispatched",
                [*lines, f"attached then: {c.line()}; never dispatched it"],
                arr["broker"],
                c,
                facts,
            )
        sub, deleted = self.durable_sub(str(serving.client_id), group, ta)
        facts = {"arrived": ta, "attached": False, "durable_sub": sub is not None}
        back = [c for c in mine if c.added > ta and _group_of(self.groups, c.broker) == group]
        if deleted is not None:
            lines.append(f"the durable subscription was deleted before: {rec_line(deleted)}")
        elif sub is not None:
            lines.append(
                f"no consumer attached; the broker kept it for the durable subscription of {sub.line()}"
            )
        elif earlier:
            lines.append(f"no consumer attached and no durable subscription; the last: {earlier[-1].line()}")
        else:
            lines.append(
                f"no consumer of {serving.client_id} before it arrived; the first: {later[0].line()}"
            )
        if back:
            durable_back = [c for c in back if c.durable]
            facts["back"] = back[0].added
            facts["back_durable"] = bool(durable_back)
            lines.append(f"came back: {back[0].line()}; never dispatched it")
        return Hop("not_dispatched", lines, arr["broker"], serving, facts)

    def _not_forwarded(
        self, first: dict[str, Any], group: str | None, serving: Consumer, recs: list[dict[str, Any]]
    ) -> Hop:
        src, t0 = str(first["broker"]), float(first["ts"])
        fwd = [
            r
            for r in recs
            if r.get("event") == ba.DISPATCHED
            and r.get("broker") == src
            and any(n.cid == r.get("cid") and n.broker == src for n in self.network)
        ]
        lines = [rec_line(first)]
        demand = [n for n in self.network if n.broker == src]
        facts: dict[str, Any] = {"arrived": t0, "toward": group}
        if fwd:
            lines += [rec_line(r) for r in fwd[:2]]
            lines.append(f"forwarded over a bridge, never arrived on group {group}")
            facts["forwarded"] = float(fwd[0]["ts"])
        else:
            then = [n for n in demand if n.attached(t0)]
            after = sorted((n for n in demand if n.added > t0), key=lambda n: n.added)
            if then:
                lines.append(
                    f"bridge consumers on {src} then: {', '.join(str(n.dest) for n in then[:4])}; "
                    "none took it"
                )
            elif after:
                lines.append(
                    f"no bridge consumer on {src} when it arrived; the first came "
                    f"{after[0].added - t0:.3f} s after ({after[0].dest})"
                )
                facts["demand_after"] = after[0].added
            else:
                lines.append(f"no bridge consumer on {src} ever")
        return Hop("not_forwarded", lines, src, serving, facts)

    def journey(self, msg_id: str) -> list[dict[str, Any]]:
        """Every record of the message, in time order, each with the consumer it names (if any)."""
        out = []
        for r in sorted(self.messages.get(msg_id, []), key=lambda r: float(r["ts"])):
            c = self.consumers.get(f"{r.get('broker')}|{r.get('cid')}") if r.get("cid") else None
            row = dict(r)
            if c is not None:
                row["consumer"] = {
                    "client_id": c.client_id,
                    "subscription": c.subscription,
                    "durable": c.durable,
                    "network": c.network,
                    "dest": c.dest,
                }
            out.append(row)
        return out
