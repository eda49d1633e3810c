"""Delivery paths: every directed pair of groups (publishers on one, subscribers on the other), and
whether ActiveMQ 5.17.2 routes it, predicted from the topology alone.

The rules are ActiveMQ's demand forwarding (docs/coverage.md, from its source): a bridge forwards
its owner's messages to its target when the target has demand; `duplex` adds the way back with the
owner's settings; over k bridges, bridge i must accept demand that already travelled k - i hops
(consumerTTL) and messages that travelled i - 1 hops (messageTTL); `network_ttl` sets both.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Literal

from harness.topology.model import Bridge, Topology
from harness.topology.traffic import families, flows

Must = Literal["deliver", "not", "report", "none"]
#: the topic a coverage agent on group `g` publishes to (MQTT spelling; ActiveMQ's is dotted)
TOPIC = "instance/status/{group}/InstanceStatusEvent"
_MAX_ROUTES = 200  # simple routes enumerated per pair (networks here have a handful of groups)


@dataclass(frozen=True)
class Hop:
    """One directed bridge: `src`'s messages forwarded to `dst` (a duplex bridge's way back too)."""

    src: str
    dst: str
    bridge: str  # "a -> b" as declared (the owner of the networkConnector first)
    message_ttl: int
    consumer_ttl: int
    static_only: bool = False  # staticBridge: no demand is ever forwarded
    destination_filter: str | None = None
    conduit: bool = True
    dynamic_only: bool = False


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


def hops_of(topology: Topology) -> list[Hop]:
    out = []
    for b in topology.bridges:
        label = f"{b.source} -> {b.target}"
        kw = {
            "message_ttl": _ttl(b, "messageTTL"),
            "consumer_ttl": _ttl(b, "consumerTTL"),
            "static_only": _truthy(b.attributes.get("staticBridge")),
            "destination_filter": str(b.attributes["destinationFilter"])
            if "destinationFilter" in b.attributes
            else None,
            "conduit": b.conduit_subscriptions,
            "dynamic_only": _truthy(b.attributes.get("dynamicOnly")),
        }
        out.append(Hop(b.source, b.target, label, **kw))  # type: ignore[arg-type]
        if b.duplex:  # the responder on the target uses the owner's settings
            out.append(Hop(b.target, b.source, label + " (duplex)", **kw))  # type: ignore[arg-type]
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


def _blocked(route: list[Hop], topic: str) -> str | None:
    """Why ActiveMQ does not deliver along `route` (None: it does)."""
    k = len(route)
    for i, h in enumerate(route, 1):
        if h.static_only:
            return f"bridge {h.bridge} is a staticBridge: it forwards no demand"
        if h.destination_filter is not None:
            flt = h.destination_filter
            flt = (
                flt if flt.startswith("ActiveMQ.Advisory.Consumer.") else "ActiveMQ.Advisory.Consumer." + flt
            )
            if not amq_match(flt, "ActiveMQ.Advisory.Consumer.Topic." + topic):
                return f"bridge {h.bridge}'s destinationFilter {h.destination_filter!r} excludes {topic}"
        if h.consumer_ttl <= k - i or h.message_ttl <= i - 1:
            ttl = min(h.consumer_ttl, h.message_ttl)
            return f"needs {k} hops, network_ttl is {ttl} (bridge {h.bridge})"
    return None


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


def predict(topology: Topology) -> list[PathPrediction]:
    """Every directed pair of groups, the group to itself included, in group order."""
    hops, comp = hops_of(topology), _components(topology)
    out = []
    for s in topology.groups:
        for d in topology.groups:
            out.append(_predict(topology, hops, s.name, d.name, comp[s.name] == comp[d.name]))
    return out


def predict_traffic(topology: Topology) -> list[PathPrediction]:
    """Every traffic flow (family, producer group, consumer group: harness.topology.traffic), in
    family then group order, with whether ActiveMQ routes the family's topics along it."""
    hops, comp = hops_of(topology), _components(topology)
    fams = {f.name: f for f in families(topology)}
    out = []
    for fl in flows(topology):
        fam = fams[fl.family]
        topic = fam.event_topics()[0].replace("/", ".")
        p = _predict(
            topology, hops, fl.source, fl.target, comp[fl.source] == comp[fl.target], topic, fam.name
        )
        out.append(replace(p, family=fam.name))
    return out


def _predict(
    topology: Topology,
    hops: list[Hop],
    src: str,
    dst: str,
    connected: bool,
    topic: str | None = None,
    family: str = "",
) -> PathPrediction:
    must = _must(topology, src, dst, connected, family)
    topic = topic or TOPIC.format(group=src).replace("/", ".")
    if src == dst:
        return PathPrediction(src, dst, must, True, 0, "the group itself")
    routes = list(_routes(hops, src, dst))
    good = [r for r in routes if _blocked(r, topic) is None]
    warnings = []
    if good:
        r = good[0]
        via = " then ".join(h.bridge for h in r)
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
        why = f"{len(r)} hop{'s' if len(r) > 1 else ''} via {via}"
        pred = PathPrediction(src, dst, must, True, len(r), why, tuple(warnings))
    elif routes:
        pred = PathPrediction(src, dst, must, False, -1, str(_blocked(routes[0], topic)))
    elif connected:
        why = (
            f"no bridge forwards from {src} toward {dst} "
            "(a bridge carries its owner's messages; duplex: true adds the way back)"
        )
        pred = PathPrediction(src, dst, must, False, -1, why)
    else:
        pred = PathPrediction(src, dst, must, False, -1, "the groups are not connected by any bridge")
    return pred


def path_warnings(predictions: list[PathPrediction]) -> list[str]:
    """The static findings `bfh topology validate` prints: a required path ActiveMQ cannot route,
    a forbidden one it does, and the routing caveats."""
    out = []
    for p in predictions:
        if p.must == "deliver" and not p.routable:
            out.append(f"path {p.label} {p.why}" if p.why.startswith("needs") else f"path {p.label}: {p.why}")
        elif p.must == "not" and p.routable:
            out.append(f"path {p.label} is declared deliver: false, but ActiveMQ routes it ({p.why})")
        out += list(p.warnings)
    return out
