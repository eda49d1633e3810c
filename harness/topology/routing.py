"""Routes over a topology's bridges as ActiveMQ 5.17.2 forwards along them (docs/coverage.md):
the directed hops, a per-source search under the TTLs, and why a route is refused.

A search from one source visits (group, hops so far) states, so `harness.topology.paths` grows
with groups x bridges, not with pairs x routes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from harness.topology.destfilter import Block, Crossing, Lists
from harness.topology.model import Bridge, Topology

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
    suppress_duplicates: bool = True  # suppressDuplicateTopicSubscriptions (ActiveMQ's default: true)


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
            "suppress_duplicates": str(
                b.attributes.get("suppressDuplicateTopicSubscriptions", "true")
            ).lower()
            != "false",
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
                b.conduit_subscriptions,
            )
            out.append(Hop(s, d, lab, lists=lists, **kw))  # type: ignore[arg-type]
    return out


def routes(hops: list[Hop], src: str, dst: str) -> Iterator[list[Hop]]:
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


#: a search state's key: (group, carries a barred demand); a state: (cap, previous key, hop taken,
#: first hop of the route)
_Key = tuple[str, bool]
_State = tuple[int, _Key, "Hop | None", "Hop | None"]


class Reach:
    """The shortest route ActiveMQ accepts from `src` to every group it reaches, over `adj`
    (group -> (hop, carried statically)). States are (group, hops so far) with cap = min over the
    hops of consumerTTL + position - 1 (a route of k hops needs cap >= k, and messageTTL >=
    position on each hop); a state is kept only when its slack (cap - hops) beats every earlier
    one of that group: a longer walk with less slack reaches nothing more, and a walk that repeats
    a group never beats its shortcut.

    `consumers`: the groups whose own consumers of the traffic pull messages to them, so the
    demand a route needs starts again there (only messageTTL counts from the source). `barred`:
    a group whose consumers' demand the source already holds on a bridge that refuses the
    message; with suppressDuplicateTopicSubscriptions the same demand relayed by another group
    is dropped (DemandForwardingBridgeSupport.duplicateSuppressionIsRequired), so a route to it
    must pass a consumer group first (a second direct bridge is no relay: measured)."""

    def __init__(
        self,
        adj: dict[str, list[tuple[Hop, bool]]],
        src: str,
        limit: int,
        consumers: frozenset[str] = frozenset(),
        barred: str | None = None,
    ) -> None:
        start: _Key = (src, False)
        best: dict[_Key, int] = {start: _BIG}
        self.layers: list[dict[_Key, _State]] = [{start: (_BIG, start, None, None)}]
        self.found: dict[str, int] = {}
        self._key: dict[str, _Key] = {}
        pos = 0
        while self.layers[-1] and pos < limit:
            pos += 1
            nxt: dict[_Key, _State] = {}
            for u, (cap, _, _, first) in self.layers[-1].items():
                for h, static in adj.get(u[0], ()):
                    if h.message_ttl < pos:
                        continue
                    c = cap if static else min(cap, h.consumer_ttl + pos - 1)
                    if c < pos:
                        continue
                    tainted = u[1] or (barred is not None and pos == 1 and not static and h.dst != barred)
                    if h.dst in consumers and h.dst != barred:
                        c, tainted = _BIG, False  # its own consumers' demand brings the message here
                    key = (h.dst, tainted)
                    if c - pos <= best.get(key, -1):
                        continue
                    best[key] = c - pos
                    nxt[key] = (c, u, h, first or h)
            for k in nxt:
                if (k[0] != barred or not k[1]) and k[0] not in self.found:
                    self.found[k[0]] = pos
                    self._key[k[0]] = k
            self.layers.append(nxt)

    def ends(self, v: str) -> tuple[Hop, Hop]:
        _, _, last, first = self.layers[self.found[v]][self._key[v]]
        assert first is not None and last is not None
        return first, last

    def route(self, v: str) -> list[Hop]:
        out: list[Hop] = []
        k = self._key[v]
        for i in range(self.found[v], 0, -1):
            _, k, step, _ = self.layers[i][k]
            assert step is not None  # only the source's own state has no hop
            out.append(step)
        return out[::-1]


class Tree:
    """Shortest routes from `src` by bridges alone (no TTL, no filter): what explains a refusal."""

    def __init__(self, hops_from: dict[str, list[Hop]], src: str) -> None:
        self.parent: dict[str, tuple[int, str, Hop | None, Hop | None]] = {src: (0, src, None, None)}
        frontier = [src]
        while frontier:
            nxt = []
            for u in frontier:
                depth, _, _, first = self.parent[u]
                for h in hops_from.get(u, ()):
                    if h.dst not in self.parent:
                        self.parent[h.dst] = (depth + 1, u, h, first or h)
                        nxt.append(h.dst)
            frontier = nxt

    def route(self, v: str) -> list[Hop]:
        out: list[Hop] = []
        while True:
            _, v, h, _ = self.parent[v]
            if h is None:
                return out[::-1]
            out.append(h)


def blocked(route: list[Hop], cross: dict[int, Crossing]) -> tuple[Block | None, str | None]:
    """Why ActiveMQ does not deliver along `route` ((None, None): it does)."""
    k = len(route)
    for i, h in enumerate(route, 1):
        c = cross.get(id(h), _PASS)
        if c.block:
            return c.block, c.block.describe()
        if (not c.static and h.consumer_ttl <= k - i) or h.message_ttl <= i - 1:
            ttl = min(h.consumer_ttl, h.message_ttl)
            return None, f"needs {k} hops, network_ttl is {ttl} (bridge {h.bridge})"
    return None, None


_PASS = Crossing(None)
