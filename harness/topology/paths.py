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

from dataclasses import dataclass, field, replace
from typing import Literal

from harness.topology.destfilter import Block, Crossing, crossing, filter_matches, to_amq
from harness.topology.model import Topology
from harness.topology.routing import Hop, Reach, Tree, blocked, hops_of, routes
from harness.topology.traffic import Family, families, flows

__all__ = [
    "Hop",
    "PathPrediction",
    "hops_of",
    "predict",
    "predict_traffic",
    "path_warnings",
    "grouped_warnings",
]

Must = Literal["deliver", "not", "report", "none"]
#: the topic a coverage agent on group `g` publishes to (MQTT spelling; ActiveMQ's is dotted)
TOPIC = "instance/status/{group}/InstanceStatusEvent"
_VIA_MAX = 8  # hops named in a route's description; longer routes name the first and last


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


def amq_match(pattern: str, name: str) -> bool:
    """ActiveMQ wildcards: `*` one segment, `>` the rest (dotted names)."""
    p, n = pattern.split("."), name.split(".")
    for i, seg in enumerate(p):
        if seg == ">":
            return True
        if i >= len(n) or (seg != "*" and seg != n[i]):
            return False
    return len(p) == len(n)


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
    consumers: frozenset[str] = frozenset()  # the groups consuming it (their demand pulls it there)


class _Router:
    """One topology's hops, with per-traffic crossings and per-source searches cached (most
    traffic crosses most bridges alike: searches are shared by what the narrowing bridges let
    through)."""

    def __init__(self, topology: Topology) -> None:
        self.t = topology
        self.hops = hops_of(topology)
        self.comp = _components(topology)
        self.hops_from: dict[str, list[Hop]] = {}
        for h in self.hops:
            self.hops_from.setdefault(h.src, []).append(h)
        self.narrow = [h for h in self.hops if h.lists.narrows]
        self.nonconduit = any(not h.conduit for h in self.hops)
        self.dynamic_only = any(h.dynamic_only for h in self.hops)
        self._cross: dict[tuple[str, tuple[str, ...]], dict[int, Crossing]] = {}
        self._adj: dict[tuple[tuple[bool, bool], ...], dict[str, list[tuple[Hop, bool]]]] = {}
        self._reach: dict[tuple[tuple[tuple[bool, bool], ...], str, frozenset[str], str | None], Reach] = {}
        self._tree: dict[str, Tree] = {}
        self.subs: tuple[str, ...] = ()  # every family's subscription (predict_traffic sets them)
        self._folders: dict[_Traffic, list[str]] = {}  # other families' demand that can absorb one's

    def crossings(self, tr: _Traffic) -> dict[int, Crossing]:
        """The narrowing hops' verdicts on `tr` (every other hop carries everything)."""
        key = (tr.sub, tr.events)
        if key not in self._cross:
            self._cross[key] = {id(h): crossing(h.lists, tr.sub, tr.events) for h in self.narrow}
        return self._cross[key]

    def reach(self, tr: _Traffic, src: str, barred: str | None = None) -> Reach:
        cross = self.crossings(tr)
        sig = tuple((cross[id(h)].block is None, cross[id(h)].static) for h in self.narrow)
        key = (sig, src, tr.consumers, barred)
        if key not in self._reach:
            if sig not in self._adj:
                adj: dict[str, list[tuple[Hop, bool]]] = {}
                for h in self.hops:
                    c = cross.get(id(h))
                    if c is None or c.block is None:
                        adj.setdefault(h.src, []).append((h, bool(c and c.static)))
                self._adj[sig] = adj
            self._reach[key] = Reach(self._adj[sig], src, len(self.t.groups), tr.consumers, barred)
        return self._reach[key]

    def refused_direct(self, tr: _Traffic, src: str, dst: str) -> Block | None:
        """A direct bridge src -> dst that takes dst's demand but refuses the message itself: with
        suppressDuplicateTopicSubscriptions on src's other bridges, that demand arriving by another
        route is dropped (DemandForwardingBridgeSupport L1456-1480)."""
        cross = self.crossings(tr)
        out = [hop for hop in self.hops_from.get(src, ()) if hop.dst != dst]
        if not all(hop.suppress_duplicates for hop in out):
            return None
        for h in self.hops_from.get(src, ()):
            c = cross.get(id(h))
            if (
                h.dst == dst
                and c is not None
                and c.block is not None
                and c.block.topic
                and c.block.kind != "conduit"
            ):
                return c.block
        return None

    def tree(self, src: str) -> Tree:
        if src not in self._tree:
            self._tree[src] = Tree(self.hops_from, src)
        return self._tree[src]

    def predict_from(self, src: str, dsts: list[str], tr: _Traffic) -> list[PathPrediction]:
        out = []
        plain = self.reach(tr, src)
        for dst in dsts:
            barred = self.refused_direct(tr, src, dst) if self.narrow and src != dst else None
            reach = self.reach(tr, src, dst) if barred else plain
            connected = self.comp[src] == self.comp[dst]
            must = _must(self.t, src, dst, connected, tr.family)
            if src == dst:
                out.append(
                    PathPrediction(src, dst, must, True, 0, "the group itself", (), tr.family, tr.topic)
                )
            elif dst in reach.found:
                out.append(self._routed(src, dst, must, reach, tr))
            elif barred is not None and dst in plain.found:  # only a relayed route is left
                why = (
                    f"{barred.describe()}; the same consumers' demand by another route is suppressed "
                    "(suppressDuplicateTopicSubscriptions)"
                )
                out.append(
                    PathPrediction(src, dst, must, False, -1, why, (), tr.family, tr.topic, barred, why)
                )
            else:
                out.append(self._refused(src, dst, must, connected, tr))
            b = out[-1].blocked_by
            if b is not None and b.topic and b.kind != "conduit":
                out[-1] = replace(out[-1], warnings=(*out[-1].warnings, _stall(b, tr.sub)))
        return out

    def _routed(self, src: str, dst: str, must: Must, reach: Reach, tr: _Traffic) -> PathPrediction:
        k = reach.found[dst]
        r = reach.route(dst) if k <= _VIA_MAX or self.dynamic_only else None
        if r is not None:
            why = _via(r)
        else:
            first, last = reach.ends(dst)
            why = f"{k} hops via {first.bridge} then ... then {last.bridge}"
        return PathPrediction(
            src, dst, must, True, k, why, self._caveats(src, dst, r or [], tr), tr.family, tr.topic
        )

    def _refused(self, src: str, dst: str, must: Must, connected: bool, tr: _Traffic) -> PathPrediction:
        tree = self.tree(src)
        if dst in tree.parent:
            cross = self.crossings(tr)
            k, _, _, first = tree.parent[dst]
            assert first is not None
            # the first hop settles most refusals without building the route
            c = cross.get(id(first), _PASS)
            block: Block | None = None
            why: str | None = None
            if c.block:
                block, why = c.block, c.block.describe()
            elif k > 1 and not c.static and first.consumer_ttl <= k - 1:
                ttl = min(first.consumer_ttl, first.message_ttl)
                why = f"needs {k} hops, network_ttl is {ttl} (bridge {first.bridge})"
            else:
                block, why = blocked(tree.route(dst), cross)
            if why is None:  # the shortest route is fine by itself: a longer one was refused
                why = f"no route within network_ttl (shortest: {_via(tree.route(dst))})"
            cause = block.describe() if block else why
            if why.startswith("needs"):
                cause = f"network_ttl {why.split('network_ttl is ')[1].split(' ')[0]} is too small"
            return PathPrediction(src, dst, must, False, -1, why, (), tr.family, tr.topic, block, cause)
        if connected:
            why = (
                f"no bridge forwards from {src} toward {dst} "
                "(a bridge carries its owner's messages; duplex: true adds the way back)"
            )
            cause = "no bridge forwards that way (duplex: true adds the way back)"
            return PathPrediction(src, dst, must, False, -1, why, (), tr.family, tr.topic, None, cause)
        why = "the groups are not connected by any bridge"
        return PathPrediction(src, dst, must, False, -1, why, (), tr.family, tr.topic, None, why)

    def _caveats(self, src: str, dst: str, r: list[Hop], tr: _Traffic) -> tuple[str, ...]:
        warnings = []
        if self.nonconduit:
            cross = self.crossings(tr)
            good = [rr for rr in routes(self.hops, src, dst) if blocked(rr, cross) == (None, None)]
            if len(good) > 1 and any(not h.conduit for rr in good for h in rr):
                warnings.append(
                    f"path {src} → {dst} has {len(good)} routes and a bridge without conduit_subscriptions: "
                    "topic messages arrive more than once"
                )
        fold = self._fold(r, tr)
        if fold:
            warnings.append(fold)
        if any(h.dynamic_only for h in r):
            warnings.append(
                f"path {src} → {dst} crosses a dynamicOnly bridge: an offline durable subscriber's "
                "messages wait on the source until it is back"
            )
        return tuple(warnings)

    def _fold(self, r: list[Hop], tr: _Traffic) -> str:
        """A conduit bridge folds a new consumer into an existing demand subscription whose filter
        matches its destination (ConduitBridge L59-102; a consumer's `*` matches any level of a
        `>` filter, PrefixDestinationFilter L79-81): when another family's demand (`x.>`) would
        absorb this one's (`*.e`) without its topics, what crosses depends on which consumer's
        advisory arrives first (measured both ways): the prediction cannot tell."""
        if tr not in self._folders:
            self._folders[tr] = [
                o
                for o in self.subs
                if o != tr.sub
                and filter_matches(o, tr.sub)
                and not all(filter_matches(o, e) for e in tr.events)
            ]
        for h in r if self._folders[tr] else ():
            if not h.conduit:
                continue
            for other in self._folders[tr]:
                if crossing(h.lists, other, ()).block is None:
                    return (
                        f"path {r[0].src} → {r[-1].dst} [{tr.family}] may lose it: on {h.bridge}, demand for "
                        f"`{other}` can absorb `{tr.sub}` (conduitSubscriptions; which arrives first decides)"
                    )
        return ""


_PASS = Crossing(None)


def _stall(b: Block, sub: str) -> str:
    """A bridge that takes the demand but refuses the message neither forwards nor acks it
    (DemandForwardingBridgeSupport L1229, no `else`; measured: 1,100 refused messages stopped the
    permitted ones, 990 did not)."""
    return (
        f"{b.bridge} takes the demand `{sub}` but refuses {b.topic} per message without acking it: "
        f"after prefetchSize (1000) such messages it forwards nothing more under `{sub}`"
    )


def _via(r: list[Hop]) -> str:
    return f"{len(r)} hop{'s' if len(r) > 1 else ''} via " + " then ".join(h.bridge for h in r)


def predict(topology: Topology) -> list[PathPrediction]:
    """Every directed pair of groups, the group to itself included, in group order (the
    coverage agents' own instance/status topic)."""
    router = _Router(topology)
    names = [g.name for g in topology.groups]
    out = []
    for s in names:
        topic = to_amq(TOPIC.format(group=s))
        out += router.predict_from(s, names, _Traffic(topic, (topic,)))
    return out


def _traffic(f: Family, consumers: frozenset[str] = frozenset()) -> _Traffic:
    return _Traffic(to_amq(f.topic), tuple(to_amq(e) for e in f.event_topics()), f.name, f.topic, consumers)


def predict_traffic(topology: Topology) -> list[PathPrediction]:
    """Every traffic flow (family, producer group, consumer group: harness.topology.traffic), in
    family then group order, with whether ActiveMQ routes the family's topics along it: its
    consumers' demand (the family's filter) and each of its event topics through every bridge's
    destination lists and filter, within the TTLs."""
    router = _Router(topology)
    fl = flows(topology)
    consumers: dict[str, set[str]] = {}
    for x in fl:  # every consumer group of a family runs at once: each pulls the family to itself
        consumers.setdefault(x.family, set()).add(x.target)
    fams = {f.name: _traffic(f, frozenset(consumers.get(f.name, ()))) for f in families(topology)}
    router.subs = tuple(dict.fromkeys(tr.sub for tr in fams.values()))
    return [router.predict_from(x.source, [x.target], fams[x.family])[0] for x in fl]


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
        first = items[0][1] or _unroutable(items[0][0])
        eg = "; ".join(f"{p.source} → {p.target}" for p, _ in items[1:examples])
        out.append(f"{len(items):,} paths: {cause}, e.g. {first}; also {eg}")
    return out
