"""confcheck's checks of one networkConnector's attributes and lists (harness/topology/confcheck.py):
what ActiveMQ does with its destination lists, its TTL attributes and duplex names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.topology.amqxml import ConfFile, Node
from harness.topology.confread import ADDRESS, NETWORK_CONNECTORS, lookup, network_connectors
from harness.topology.model import Group
from harness.topology.parts import MAX_DESTINATIONS

#: confcheck's `_Checker.add`: (severity, file, line, problem, fix)
Add = Callable[[str, ConfFile, int, str, str], None]
DEST_LIST_TAGS = ("excludedDestinations", "dynamicallyIncludedDestinations", "staticallyIncludedDestinations")


def destinations(add: Add, conf: ConfFile, n: Node) -> None:
    """A connector's destination lists as ActiveMQ reads them: an empty physicalName stops
    the broker (ActiveMQDestination.setPhysicalName: "a non-empty name is required"), and a
    list longer than the harness reads is refused here."""
    for lst in n.children:
        if not lst.amq or lst.tag not in DEST_LIST_TAGS:
            continue
        entries = [d for d in lst.children if d.amq and d.tag in ("topic", "queue")]
        if len(entries) > MAX_DESTINATIONS:
            add(
                "error",
                conf,
                lst.line,
                f"<{lst.tag}> lists {len(entries):,} destinations; the harness reads at most "
                f"{MAX_DESTINATIONS:,} per list",
                "fold entries into wildcards (`a.>`, `*.b`)",
            )
        for d in entries:
            if not d.attrs.get("physicalName", "").strip():
                add(
                    "error",
                    conf,
                    d.line,
                    f"<{d.tag}> with an empty physicalName: ActiveMQ refuses to start "
                    "(Invalid destination name: a non-empty name is required)",
                    "remove the entry, or name a destination",
                )


def ttl_order(add: Add, conf: ConfFile, n: Node) -> None:
    a = n.attrs
    for k in ("consumerTTL", "messageTTL"):
        if "networkTTL" in a and k in a and a[k].strip() != a["networkTTL"].strip():
            add(
                "warning",
                conf,
                n.line,
                f'networkConnector {a.get("name") or a.get("uri", "")!r}: {k}="{a[k]}" has no effect: '
                f'networkTTL="{a["networkTTL"]}" sets it too and is applied after it (attributes are '
                "applied in name order; NetworkBridgeConfiguration.setNetworkTTL sets both)",
                f"drop networkTTL and write consumerTTL and messageTTL, or drop {k}",
            )


def duplex_names(add: Add, conf: ConfFile, g: Group, hosts: Any, members: dict[str, Group]) -> None:
    """Two duplex connectors with one name to one group: the remote broker keys a duplex
    bridge by `name@brokerId` and stops the older (TransportConnection.processBrokerInfo)."""
    seen: dict[tuple[str, str], Node] = {}
    for n in network_connectors(conf):
        if not n.amq or n.tag not in NETWORK_CONNECTORS:
            continue
        if n.attrs.get("duplex", "").strip().lower() != "true":
            continue
        name = n.attrs.get("name") or "NC"
        for m in ADDRESS.finditer(n.attrs.get("uri", "")):
            member = lookup(hosts, m["host"], m["port"])
            tg = members[member].name if member in members else None
            if tg is None or tg == g.name:
                continue
            first = seen.setdefault((name, tg), n)
            if first is not n:
                add(
                    "warning",
                    conf,
                    n.line,
                    f"duplex networkConnectors on lines {first.line} and {n.line} both go to group "
                    f"{tg!r} as {name!r}: its broker keeps one duplex bridge per name and stops the "
                    "other, so only one of them carries traffic",
                    "give each duplex networkConnector its own name",
                )
