"""Delivery paths: every directed pair of groups (publishers on one, subscribers on the other), and
whether ActiveMQ 5.17.2 routes it, predicted from the topology alone; per traffic family, through
every bridge's destination lists and filter (harness.topology.destfilter).

The rules are ActiveMQ's demand forwarding (docs/coverage.md, from its source): a bridge forwards
its owner's messages to its target when the target has demand; `duplex` adds the way back with the
owner's settings; over k bridges, bridge i must accept demand that already travelled k - i hops
(consumerTTL) and messages that travelled i - 1 hops (messageTTL); `network_ttl` sets both.
The search is per source group over (group, hops so far) states, so it grows with groups x
bridges, not with pairs x routes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from harness.topology.destfilter import Block, Crossing, Lists, crossing, to_amq
from harness.topology.model import Bridge, Topology
from harness.topology.traffic import Family, families, flows

Must = Literal["deliver", "not", "report", "none"]
#: the topic a coverage agent on group `g` publishes to (MQTT spelling; ActiveMQ's is dotted)
TOPIC = "instance/status/{group}/InstanceStatusEvent"
_MAX_ROUTES = 200  # simple routes enumerated per pair, only to count a non-conduit bridge's duplicates


_BIG = 10**9  # the consumerTTL cap of a statically carried hop (no demand travels)


@dataclass(frozen=True)
class Hop:
    """One directed bridge: `src`'s messages forwarded to `dst` (a duplex bridge's way back too)."""

    src: str
    dst: str
    bridge: str  # "a -> b" as declared (the owner of the networkConnector first), or its name
    message_ttl: int
    consumer_ttl: int
    static_only: bool = False  # staticBridge: no demand is ever forwarded
    destination_filter: str | None = None
    conduit: bool = True
    dynamic_only: bool = False
    lists: Lists = field(default_factory=lambda: Lists(""))


@dataclass(frozen=True)
class PathPrediction:
    source: str
    target: str
    must: Must
    routable: bool
    hops: int  # of the shortest route ActiveMQ uses (0: the group itself; -1: none)
    why: str  # one line: how it routes, or why it does not
    warnings: tuple[str, ...] = field(default_factory=tuple)
    family: str = ""  # the traffic family (harness.topology.traffic); "" for a bare group pair
    topic: str = ""  # the family's MQTT filter ("" for a bare group pair)
    blocked_by: Block | None = None  # the bridge list or filter that stops it, when one does
    cause: str = ""  # why not, without the path (warnings are grouped by it)

    @property
    def label(self) -> str:
        return f"{self.source} → {self.target}"

    @property
    def key(self) -> str:
        return f"{self.source}->{self.target}"


def _ttl(b: Bridge, name: str) -> int:
    raw = b.attributes.get(name, b.network_ttl)
    try:
        v = int(raw)
    except (TypeError, ValueError):
        return b.network_ttl
    return 10**6 if v < 0 else v  # -1: unlimited


def _truthy(v: object) -> bool:
    return str(v).lower() == "true"


def _where(b: Bridge, key: str) -> tuple[str | None, int | None]:
    f, _, line = b.origin.get(key, "").rpartition(":")
    return (f, int(line)) if f and line.isdigit() else (None, None)


def hops_of(topology: Topology) -> list[Hop]:
    out = []
    for b in topology.bridges:
        label = b.origin.get("name") or f"{b.source} -> {b.target}"
        flt = b.attributes.get("destinationFilter")
        kw = {
            "message_ttl": _ttl(b, "messageTTL"),
            "consumer_ttl": _ttl(b, "consumerTTL"),
            "static_only": _truthy(b.attributes.get("staticBridge")),
            "destination_filter": None if flt is None else str(flt),
            "conduit": b.conduit_subscriptions,
            "dynamic_only": _truthy(b.attributes.get("dynamicOnly")),
        }
        ways = [(b.source, b.target, label)]
        if b.duplex:  # the responder on the target uses the owner's settings, lists included
            ways.append((b.target, b.source, label + " (duplex)"))
        for s, d, lab in ways:
            lists = Lists(
                lab,
                tuple(b.excluded_destinations),
                tuple(b.dynamically_included_destinations),
                tuple(b.statically_included_destinations),
                kw["destination_filter"],  # type: ignore[arg-type]
                _where(b, "destinationFilter"),
                bool(kw["static_only"]),
                _where(b, "staticBridge"),
            )
            out.append(Hop(s, d, lab, lists=lists, **kw))  # type: ignore[arg-type]
    return out


def _routes(hops: list[Hop], src: str, dst: str) -> Iterator[list[Hop]]:
    """Simple routes (no group twice) from src to dst, shortest first."""
    frontier: list[list[Hop]] = [[h] for h in hops if h.src == src]
    n = 0
    while frontier and n < _MAX_ROUTES:
        nxt: list[list[Hop]] = []
        for r in frontier:
            if r[-1].dst == dst:
                n += 1
                yield r
                continue
            seen = {src, *(h.dst for h in r)}
            nxt += [[*r, h] for h in hops if h.src == r[-1].dst and h.dst not in seen]
        frontier = nxt


def amq_match(pattern: str, name: str) -> bool:
    """ActiveMQ wildcards: `*` one segment, `>` the rest (dotted names)."""
    p, n = pattern.split("."), name.split(".")
    for i, seg in enumerate(p):
        if seg == ">":
            return True
        if i >= len(n) or (seg != "*" and seg != n[i]):
            return False
    return len(p) == len(n)


def _reach(adj: dict[str, list[tuple[Hop, bool]]], src: str, limit: int) -> dict[str, list[Hop]]:
    """The shortest route ActiveMQ accepts from `src` to every group it reaches. States are
    (group, hops so far) with cap = min over the hops of consumerTTL + position - 1 (a route of
    k hops needs cap >= k, and messageTTL >= position on each hop); a state is kept only when
    its slack (cap - hops) beats every earlier one of that group: a longer walk with less slack
    can reach nothing more. A walk that repeats a group never beats its shortcut."""
    best: dict[str, int] = {src: _BIG}
    layers: list[dict[str, tuple[int, str, Hop | None]]] = [{src: (_BIG, src, None)}]
    found: dict[str, int] = {}
    pos = 0
    while layers[-1] and pos < limit:
        pos += 1
        nxt: dict[str, tuple[int, str, Hop | None]] = {}
        for u, (cap, _, _) in layers[-1].items():
            for h, static in adj.get(u, ()):
                if h.message_ttl < pos:
                    continue
                c = cap if static else min(cap, h.consumer_ttl + pos - 1)
                if c < pos or c - pos <= best.get(h.dst, -1):
                    continue
                best[h.dst] = c - pos
                nxt[h.dst] = (c, u, h)
        for v in nxt:
            found.setdefault(v, pos)
        layers.append(nxt)
    out = {}
    for v, k in found.items():
        route: list[Hop] = []
        g = v
        for i in range(k, 0, -1):
            _, g, step = layers[i][g]
            assert step is not None  # only the source's own state has no hop
            route.append(step)
        out[v] = route[::-1]
    return out


def _bfs(hops_from: dict[str, list[Hop]], src: str) -> dict[str, list[Hop]]:
    """The shortest route by bridges alone (no TTL, no filter): what explains a refusal."""
    out: dict[str, list[Hop]] = {src: []}
    frontier = [src]
    while frontier:
        nxt = []
        for u in frontier:
            for h in hops_from.get(u, ()):
                if h.dst not in out:
                    out[h.dst] = [*out[u], h]
                    nxt.append(h.dst)
        frontier = nxt
    return out


def _blocked(route: list[Hop], cross: dict[int, Crossing]) -> tuple[Block | None, str | None]:
    """Why ActiveMQ does not deliver along `route` ((None, None): it does)."""
    k = len(route)
    for i, h in enumerate(route, 1):
        c = cross[id(h)]
        if c.block:
            return c.block, c.block.describe()
        if (not c.static and h.consumer_ttl <= k - i) or h.message_ttl <= i - 1:
            ttl = min(h.consumer_ttl, h.message_ttl)
            return None, f"needs {k} hops, network_ttl is {ttl} (bridge {h.bridge})"
    return None, None


def _components(topology: Topology) -> dict[str, int]:
    comp = {g.name: i for i, g in enumerate(topology.groups)}
    changed = True
    while changed:
        changed = False
        for b in topology.bridges:
            lo = min(comp[b.source], comp[b.target])
            for g in (b.source, b.target):
                if comp[g] != lo:
                    comp[g], changed = lo, True
    return comp


def _must(topology: Topology, src: str, dst: str, connected: bool, family: str = "") -> Must:
    if src == dst:
        return "deliver"
    if topology.paths is not None:
        mine = [p for p in topology.paths if (p.source, p.target) == (src, dst)]
        # a declaration naming the family wins over one for every family
        for p in sorted(mine, key=lambda p: p.family is None):
            if p.family in (None, family or None):
                return "deliver" if p.deliver else "not"
        return "report" if connected else "none"
    return "deliver" if connected else "none"


@dataclass(frozen=True)
class _Traffic:
    sub: str  # the consumers' subscription, dotted
    events: tuple[str, ...]  # the producers' topics, dotted
    family: str = ""
    topic: str = ""  # MQTT filter


class _Router:
    """One topology's hops, with per-traffic crossings and per-source searches cached."""

    def __init__(self, topology: Topology) -> None:
        self.t = topology
        self.hops = hops_of(topology)
        self.comp = _components(topology)
        self.hops_from: dict[str, list[Hop]] = {}
        for h in self.hops:
            self.hops_from.setdefault(h.src, []).append(h)
        self.nonconduit = any(not h.conduit for h in self.hops)
        self._cross: dict[tuple[str, tuple[str, ...]], dict[int, Crossing]] = {}
        self._reach: dict[tuple[str, tuple[str, ...], str], dict[str, list[Hop]]] = {}
        self._bfs: dict[str, dict[str, list[Hop]]] = {}

    def crossings(self, tr: _Traffic) -> dict[int, Crossing]:
        key = (tr.sub, tr.events)
        if key not in self._cross:
            self._cross[key] = {id(h): crossing(h.lists, tr.sub, tr.events) for h in self.hops}
        return self._cross[key]

    def reach(self, tr: _Traffic, src: str) -> dict[str, list[Hop]]:
        key = (tr.sub, tr.events, src)
        if key not in self._reach:
            cross = self.crossings(tr)
            adj: dict[str, list[tuple[Hop, bool]]] = {}
            for h in self.hops:
                c = cross[id(h)]
                if c.block is None:
                    adj.setdefault(h.src, []).append((h, c.static))
            self._reach[key] = _reach(adj, src, len(self.t.groups))
        return self._reach[key]

    def plain(self, src: str) -> dict[str, list[Hop]]:
        if src not in self._bfs:
            self._bfs[src] = _bfs(self.hops_from, src)
        return self._bfs[src]

    def predict(self, src: str, dst: str, tr: _Traffic) -> PathPrediction:
        connected = self.comp[src] == self.comp[dst]
        must = _must(self.t, src, dst, connected, tr.family)
        if src == dst:
            return PathPrediction(
                src, dst, must, True, 0, "the group itself", family=tr.family, topic=tr.topic
            )
        r = self.reach(tr, src).get(dst)
        if r:
            return PathPrediction(
                src, dst, must, True, len(r), _via(r), self._caveats(src, dst, r, tr), tr.family, tr.topic
            )
        plain = self.plain(src).get(dst)
        if plain:
            block, why = _blocked(plain, self.crossings(tr))
            if why is None:  # the shortest route is fine by itself: a longer one was refused
                block, why = None, f"no route within network_ttl (shortest: {_via(plain)})"
            cause = block.describe() if block else why or ""
            if why.startswith("needs"):
                cause = f"network_ttl {why.split('network_ttl is ')[1].split(' ')[0]} is too small"
            return PathPrediction(
                src,
                dst,
                must,
                False,
                -1,
                why,
                blocked_by=block,
                cause=cause,
                family=tr.family,
                topic=tr.topic,
            )
        if connected:
            why = (
                f"no bridge forwards from {src} toward {dst} "
                "(a bridge carries its owner's messages; duplex: true adds the way back)"
            )
            cause = "no bridge forwards that way (duplex: true adds the way back)"
            return PathPrediction(
                src, dst, must, False, -1, why, cause=cause, family=tr.family, topic=tr.topic
            )
        why = "the groups are not connected by any bridge"
        return PathPrediction(src, dst, must, False, -1, why, cause=why, family=tr.family, topic=tr.topic)

    def _caveats(self, src: str, dst: str, r: list[Hop], tr: _Traffic) -> tuple[str, ...]:
        warnings = []
        if self.nonconduit:
            cross = self.crossings(tr)
            good = [rr for rr in _routes(self.hops, src, dst) if _blocked(rr, cross) == (None, None)]
            if len(good) > 1 and any(not h.conduit for rr in good for h in rr):
                warnings.append(
                    f"path {src} → {dst} has {len(good)} routes and a bridge without conduit_subscriptions: "
                    "topic messages arrive more than once"
                )
        if any(h.dynamic_only for h in r):
            warnings.append(
                f"path {src} → {dst} crosses a dynamicOnly bridge: an offline durable subscriber's "
                "messages wait on the source until it is back"
            )
        return tuple(warnings)


def _via(r: list[Hop]) -> str:
    return f"{len(r)} hop{'s' if len(r) > 1 else ''} via " + " then ".join(h.bridge for h in r)


def predict(topology: Topology) -> list[PathPrediction]:
    """Every directed pair of groups, the group to itself included, in group order (the
    coverage agents' own instance/status topic)."""
    router = _Router(topology)
    out = []
    for s in topology.groups:
        topic = to_amq(TOPIC.format(group=s.name))
        tr = _Traffic(topic, (topic,))
        out += [router.predict(s.name, d.name, tr) for d in topology.groups]
    return out


def _traffic(f: Family) -> _Traffic:
    return _Traffic(to_amq(f.topic), tuple(to_amq(e) for e in f.event_topics()), f.name, f.topic)


def predict_traffic(topology: Topology) -> list[PathPrediction]:
    """Every traffic flow (family, producer group, consumer group: harness.topology.traffic), in
    family then group order, with whether ActiveMQ routes the family's topics along it: its
    consumers' demand (the family's filter) and each of its event topics through every bridge's
    destination lists and filter, within the TTLs."""
    router = _Router(topology)
    fams = {f.name: _traffic(f) for f in families(topology)}
    return [router.predict(fl.source, fl.target, fams[fl.family]) for fl in flows(topology)]


def path_warnings(predictions: list[PathPrediction]) -> list[str]:
    """The static findings `bfh topology validate` prints: a required path ActiveMQ cannot route,
    a forbidden one it does, and the routing caveats (one per prediction; see grouped_warnings)."""
    out = []
    for p in predictions:
        if p.must == "deliver" and not p.routable:
            out.append(_unroutable(p))
        elif p.must == "not" and p.routable:
            out.append(f"{_name(p)} is declared deliver: false, but ActiveMQ routes it ({p.why})")
        out += list(p.warnings)
    return out


def _name(p: PathPrediction) -> str:
    return f"{p.topic} from {p.source} to {p.target}" if p.family else f"path {p.label}"


def _unroutable(p: PathPrediction) -> str:
    if p.family:
        return f"{_name(p)}: {p.why}"
    return f"path {p.label} {p.why}" if p.why.startswith("needs") else f"path {p.label}: {p.why}"


def grouped_warnings(predictions: list[PathPrediction], examples: int = 3) -> list[str]:
    """path_warnings grouped by cause (the bridge and its filter, the TTL, the direction): one line
    per cause with the count and a few example paths; a cause met once keeps its full line."""
    groups: dict[str, list[tuple[PathPrediction, str]]] = {}
    for p in predictions:
        if p.must == "deliver" and not p.routable:
            key = (f"{p.topic}: " if p.family else "") + p.cause
            groups.setdefault(key, []).append((p, ""))  # the text only if the cause is met once
        elif p.must == "not" and p.routable:
            groups.setdefault("declared deliver: false, but ActiveMQ routes it", []).append(
                (p, f"{_name(p)} is declared deliver: false, but ActiveMQ routes it ({p.why})")
            )
        for w in p.warnings:
            groups.setdefault(w.replace(f"path {p.source} → {p.target} ", "", 1), []).append((p, w))
    out = []
    for cause, items in groups.items():
        if len(items) == 1:
            out.append(items[0][1] or _unroutable(items[0][0]))
            continue
        eg = "; ".join(f"{p.source} → {p.target}" for p, _ in items[:examples])
        out.append(f"{len(items):,} paths: {cause} (e.g. {eg})")
    return out
