"""A network bridge's destination filters, as ActiveMQ 5.17.2 applies them (docs/coverage.md,
"Destination filters", cites the source): which topics' demand a bridge accepts and which
messages it forwards.

The names are ActiveMQ's (dotted): an MQTT filter `topology/#` is the consumer destination
`topology.>` (MQTTProtocolSupport.convertMQTTToActiveMQ), and that destination is what a bridge
checks demand against; each forwarded message is checked again by its own topic.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.topology.parts import DEST_LISTS, Bridge, Destination

ADVISORY_PREFIX = "ActiveMQ.Advisory.Consumer."  # AdvisorySupport.CONSUMER_ADVISORY_TOPIC_PREFIX

LIST_NAMES = {
    "excluded": "excludedDestinations",
    "dynamic": "dynamicallyIncludedDestinations",
    "static": "staticallyIncludedDestinations",
}


@dataclass(frozen=True)
class Block:
    """What keeps a family from crossing one bridge: the bridge (label), the list or attribute
    (`excludedDestinations`, `dynamicallyIncludedDestinations`, `staticallyIncludedDestinations`,
    `destinationFilter`, `staticBridge`), the filter pattern, and where it is written."""

    bridge: str
    kind: str
    pattern: str
    file: str | None = None
    line: int | None = None
    topic: str = ""  # the event topic refused per message ("" when the demand was refused)

    @property
    def where(self) -> str:
        if not self.file:
            return ""
        f = os.path.relpath(self.file) if os.path.isabs(self.file) else self.file
        f = self.file if f.startswith("..") else f
        return f" ({f}:{self.line})" if self.line else f" ({f})"

    def describe(self) -> str:
        msg = f" (its topic {self.topic})" if self.topic else ""
        if self.kind == "staticBridge":
            return f"{self.bridge} is a staticBridge: it forwards no demand and includes nothing{self.where}"
        if self.kind == "conduit":
            return (
                f"{self.bridge} folds the demand into its statically included `{self.pattern}` "
                f"(conduitSubscriptions), which does not carry {self.topic}{self.where}"
            )
        what = {
            "excludedDestinations": "excluded by",
            "dynamicallyIncludedDestinations": "not in",
            "staticallyIncludedDestinations": "staticBridge: not in",
            "destinationFilter": "refused by",
        }[self.kind]
        return f"{what} {self.bridge}'s {self.kind} `{self.pattern}`{msg}{self.where}"


def to_amq(mqtt: str) -> str:
    """MQTTProtocolSupport.convertMQTTToActiveMQ: `/`->`.`, `+`->`*`, `#`->`>` (and `.`->`/`)."""
    table = str.maketrans({"/": ".", ".": "/", "+": "*", "#": ">", "*": "+", ">": "#"})
    return mqtt.translate(table)


def filter_matches(pattern: str, name: str) -> bool:
    """DestinationFilter.parseFilter(pattern).matches(name) for two names of one type: a last `>`
    is a PrefixDestinationFilter, a `*` a WildcardDestinationFilter, else equality. `name` may be
    a wildcard consumer destination: its `*` matches any level of a prefix filter, its `>` only
    a `>`, or the prefix filter's `>` when `name` is one level shorter."""
    p, path = pattern.split("."), name.split(".")
    if p[-1] == ">":
        while len(p) > 1 and p[-2] == ">":  # trailing `>`s collapse to one
            p.pop()

        def m(a: str, b: str) -> bool:
            return b == "*" or a == "*" or a == b

        if len(path) >= len(p):
            return all(m(p[i], path[i]) for i in range(len(p) - 1))
        return all(m(p[i], path[i]) for i in range(len(path))) and len(p) == len(path) + 1
    if "*" in p:
        return len(p) == len(path) and all(a == "*" or a == b for a, b in zip(p, path, strict=True))
    return pattern == name


@dataclass(frozen=True)
class Lists:
    """One directed bridge's destination settings (a duplex responder gets the owner's)."""

    bridge: str
    excluded: tuple[Destination, ...] = ()
    dynamic: tuple[Destination, ...] = ()
    static: tuple[Destination, ...] = ()
    destination_filter: str | None = None
    filter_where: tuple[str | None, int | None] = (None, None)
    static_bridge: bool = False
    static_where: tuple[str | None, int | None] = (None, None)
    conduit: bool = True  # conduitSubscriptions: a new demand folds into a matching existing one

    @property
    def narrows(self) -> bool:
        return bool(
            self.excluded or self.dynamic or self.static or self.static_bridge or self.destination_filter
        )


def _topics(ds: Sequence[Destination]) -> list[Destination]:
    return [d for d in ds if d.kind == "topic"]


def _listed(lists: Lists, kind: str, ds: Sequence[Destination], topic: str = "") -> Block:
    return Block(lists.bridge, kind, ", ".join(d.name for d in ds), ds[0].file, ds[0].line, topic)


def permissible(lists: Lists, name: str, topic: bool = False) -> Block | None:
    """DemandForwardingBridgeSupport.isPermissableDestination for topic `name`: excluded first,
    then statically included, then (when listed) dynamically included; None: permitted."""
    for d in _topics(lists.excluded):
        if filter_matches(d.name, name):
            return Block(lists.bridge, LIST_NAMES["excluded"], d.name, d.file, d.line, name if topic else "")
    if any(filter_matches(d.name, name) for d in _topics(lists.static)):
        return None
    if lists.dynamic:
        if any(filter_matches(d.name, name) for d in _topics(lists.dynamic)):
            return None
        return _listed(lists, LIST_NAMES["dynamic"], lists.dynamic, name if topic else "")
    return None


def advisory_filter(lists: Lists) -> list[str]:
    """NetworkBridgeConfiguration.getDestinationFilter, split as `new ActiveMQTopic(...)` splits a
    composite name (only the first part gets the advisory prefix)."""
    if lists.destination_filter is None:
        if lists.dynamic:
            # a composite entry's later parts follow a comma: no prefix, so no advisory matches them
            return [
                d.name if d.composite_tail else f"{ADVISORY_PREFIX}{d.kind.title()}.{d.name}"
                for d in lists.dynamic
            ]
        return [ADVISORY_PREFIX + ">"]
    f = lists.destination_filter
    f = f if f.startswith(ADVISORY_PREFIX) else ADVISORY_PREFIX + f
    # ActiveMQDestination.setPhysicalName trims the whole name and each composite part
    return [p.strip() for p in f.strip().split(",") if p.strip()]


def demand_refused(lists: Lists, sub: str) -> Block | None:
    """Why a consumer on topic `sub` (its subscription, dotted) creates no demand across the
    bridge: the advisory topic it fires is outside the destinationFilter, or the destination is
    not permissible (serviceRemoteConsumerAdvisory)."""
    if lists.destination_filter is not None:
        advisory = f"{ADVISORY_PREFIX}Topic.{sub}"
        if not any(filter_matches(p, advisory) for p in advisory_filter(lists)):
            file, line = lists.filter_where
            return Block(lists.bridge, "destinationFilter", lists.destination_filter, file, line)
    elif any(d.composite_tail for d in lists.dynamic):
        advisory = f"{ADVISORY_PREFIX}Topic.{sub}"
        if not any(filter_matches(p, advisory) for p in advisory_filter(lists)):
            heads = [d for d in lists.dynamic if not d.composite_tail]
            return _listed(lists, LIST_NAMES["dynamic"], heads or lists.dynamic)
    return permissible(lists, sub)


@dataclass(frozen=True)
class Crossing:
    """Whether a family crosses one bridge: `block` None when it does; `static` when statically
    included destinations carry it (no demand needed, so no consumerTTL either)."""

    block: Block | None
    static: bool = False


def crossing(lists: Lists, sub: str, events: Sequence[str]) -> Crossing:
    """A family (consumers on `sub`, producers on `events`) over one directed bridge."""
    if not lists.narrows:
        return Crossing(None)
    # serviceLocalCommand checks every message's own topic, static subscriptions' included
    per_message = next((b for b in (permissible(lists, e, topic=True) for e in events) if b), None)
    usable = [d for d in _topics(lists.static) if permissible(lists, d.name) is None]
    if per_message is None and events and all(any(filter_matches(d.name, e) for d in usable) for e in events):
        return Crossing(None, static=True)
    # a static subscription exists from the start: a conduit bridge folds demand it matches into it
    # (ConduitBridge.addToAlreadyInterestedConsumers), so only the topics it covers cross (measured)
    folding = [d for d in usable if lists.conduit and filter_matches(d.name, sub)]
    left = [e for e in events if not any(filter_matches(d.name, e) for d in folding)]
    if folding and left:
        d = folding[0]
        return Crossing(Block(lists.bridge, "conduit", d.name, d.file, d.line, left[0]))
    if lists.static_bridge:
        if lists.static:
            return Crossing(_listed(lists, LIST_NAMES["static"], lists.static))
        file, line = lists.static_where
        return Crossing(Block(lists.bridge, "staticBridge", "true", file, line))
    return Crossing(demand_refused(lists, sub) or per_message)


def locate(
    bridges: Sequence[Bridge], source: str, line_of: Callable[[tuple[str | int, ...]], int | None]
) -> list[Bridge]:
    """YAML bridges with the topology file and line of each destination list entry and routing
    attribute, which the warnings cite (an imported activemq.xml's carry theirs already)."""
    out = []
    for i, b in enumerate(bridges):
        update: dict[str, object] = {}
        for name in DEST_LISTS:
            entries = getattr(b, name)
            if entries and entries[0].file is None:
                update[name] = [
                    d.model_copy(update={"file": source, "line": line_of(("bridges", i, name, j))})
                    for j, d in enumerate(entries)
                ]
        origin = {
            k: f"{source}:{line_of(('bridges', i, 'attributes', k))}"
            for k in ("destinationFilter", "staticBridge")
            if k in b.attributes and k not in b.origin
        }
        if origin:
            update["origin"] = {**b.origin, **origin}
        out.append(b.model_copy(update=update) if update else b)
    return out
