"""Importing a deployment's own activemq.xml files (`config:` in a topology) at load time: the
static checks (harness.topology.confcheck) must pass, then each config group's connectors and the
bridges its networkConnectors make are taken from its files. Rewriting a file for one member of a
run is harness.deploy.importconf's."""

from __future__ import annotations

import re
from typing import Any

from harness.topology.amqxml import parse
from harness.topology.confcheck import (
    ADDRESS,
    Finding,
    check,
    errors,
    file_protocols,
    lookup,
    member_files,
    network_connectors,
    required_protocols,
)
from harness.topology.model import Bridge, ConnectorSpec, Group, Problem, Topology, TopologyError
from harness.topology.parts import AMQ_NAME_PATTERN

AMQ_NAME = re.compile(AMQ_NAME_PATTERN)

PROTOCOL_ORDER = ("mqtt", "stomp", "openwire")


def import_configs(topology: Topology, source: str) -> Topology:
    """Check the imported files (TopologyError listing every error) and return the topology with
    each config group's connectors and bridges taken from its files."""
    findings = check(topology)
    for i, b in enumerate(topology.bridges):
        if topology.group(b.source).config:
            findings.append(_bridge_conflict(source, i, b))
    errs = errors(findings)
    if errs:
        n = len(errs)
        head = f"{source}: invalid broker configuration ({n} problem{'s' if n != 1 else ''})"
        raise TopologyError(
            "\n".join([head] + ["  " + f.render() for f in errs]),
            [Problem((), f.render()) for f in errs],
        )
    groups = [_effective_group(g) if g.config else g for g in topology.groups]
    bridges = list(topology.bridges) + _bridges(topology)
    return topology.model_copy(update={"groups": groups, "bridges": bridges})


def _bridge_conflict(source: str, i: int, b: Bridge) -> Finding:
    return Finding(
        "error",
        source,
        1,
        f"bridges[{i}] starts at group {b.source!r}, whose networkConnectors come from its config file",
        "drop the bridge, or add the networkConnector to the file and map its hosts in `hosts:`",
    )


def _effective_group(g: Group) -> Group:
    confs = [parse(f) for f in member_files(g)]
    need, _ = required_protocols(g, confs)
    have = need.union(*(file_protocols(c) for c in confs))
    conns = {p: g.connectors.get(p, ConnectorSpec()) for p in PROTOCOL_ORDER if p in have}  # type: ignore[call-overload]
    store = g.store if "store" in g.model_fields_set else ("shared" if _shares_store(confs) else "own")
    return g.model_copy(update={"connectors": conns, "store": store})


def _shares_store(confs: list[Any]) -> bool:
    """Whether the members' files name one store on storage they all mount (confcheck warns when
    not): a kahaDB directory outside each member's own folders, the same in every file."""
    dirs = set()
    for conf in confs:
        broker = conf.broker
        adapters = [
            c for pa in (broker.find("persistenceAdapter") if broker else []) for c in pa.children if c.amq
        ]
        found = [a.attrs.get("directory", "") for a in adapters if a.tag in ("kahaDB", "mKahaDB")]
        if not found or any(
            not d or d.startswith(("${activemq.base}", "${activemq.data}")) or not d.startswith(("/", "${"))
            for d in found
        ):
            return False
        dirs.update(found)
    return len(dirs) == 1


def _bridges(t: Topology) -> list[Bridge]:
    """One bridge per networkConnector and group it names: two connectors between one pair of
    groups are two bridges in ActiveMQ (each its own demand and filters), and in the prediction."""
    members = {m: g.name for g in t.groups for m in g.member_names()}
    found: list[tuple[str, str, str, dict[str, Any]]] = []
    for g in t.groups:
        if not g.config:
            continue
        done: set[str] = set()  # a pair's connectors come from the first member file naming it
        for f in dict.fromkeys(member_files(g)):
            conf = parse(f)
            mine: list[tuple[str, str, dict[str, Any]]] = []
            for n in network_connectors(conf):
                uri = n.attrs.get("uri", "")
                if n.tag != "networkConnector" or uri.startswith("multicast:"):
                    continue
                targets = [lookup(t.hosts, m["host"], m["port"]) for m in ADDRESS.finditer(uri)]
                for tg in dict.fromkeys(members[m] for m in targets if m):
                    if tg == g.name:
                        continue
                    same = sum(1 for m in targets if m and members[m] == tg)
                    if uri.startswith("masterslave:"):
                        form = "masterslave"
                    elif "failover:" in uri:
                        form = "failover"
                    elif same > 1:
                        form = "static-list"
                    else:
                        form = "static"
                    mine.append((tg, form, _routing(n, conf)))
            mine = _one_duplex_per_name(mine)
            for tg, form, routing in mine:
                if tg not in done:
                    found.append((g.name, tg, form, routing))
            done.update(tg for tg, _, _ in mine)
    out = []
    per_pair: dict[tuple[str, str], int] = {}
    for src, tgt, form, routing in found:
        if form == "masterslave" and t.group(tgt).size < 2:
            form = "static"
        k = per_pair[(src, tgt)] = per_pair.get((src, tgt), 0) + 1
        name = f"import-{src}-{tgt}" + (f"-{k}" if k > 1 else "")
        out.append(Bridge.model_validate({"from": src, "to": tgt, "uri": form, "name": name, **routing}))
    return out


def _one_duplex_per_name(
    conns: list[tuple[str, str, dict[str, Any]]],
) -> list[tuple[str, str, dict[str, Any]]]:
    """The remote broker keeps one duplex bridge per `name@brokerId` and stops the older
    (TransportConnection.processBrokerInfo): of duplex connectors with one name (default `NC`) to
    one group, the last started carries traffic (confcheck warns)."""
    last: dict[tuple[str, str], int] = {}
    for i, (tg, _, r) in enumerate(conns):
        if r.get("duplex"):
            last[(tg, r["origin"].get("name", "NC"))] = i
    return [
        c
        for i, c in enumerate(conns)
        if not c[2].get("duplex") or last[(c[0], c[2]["origin"].get("name", "NC"))] == i
    ]


#: networkConnector attributes the delivery-path prediction reads (harness/coverage/paths.py)
_ROUTING_ATTRS = ("consumerTTL", "messageTTL", "dynamicOnly", "staticBridge", "destinationFilter")


#: networkConnector children listing destinations, and the Bridge field each becomes
_LISTS = {
    "excludedDestinations": "excluded_destinations",
    "dynamicallyIncludedDestinations": "dynamically_included_destinations",
    "staticallyIncludedDestinations": "statically_included_destinations",
}


def _attr_line(n: Any, conf: Any, attr: str) -> int:
    """The line of attribute `attr` in `n`'s start tag (a tag often spans lines)."""
    tag = conf.data[n.start : n.start_end]
    at = tag.find(f" {attr}=".encode())
    return n.line + (tag[:at].count(b"\n") if at >= 0 else 0)


def _entries(d: Any, conf: Any) -> list[dict[str, Any]]:
    """A list entry as ActiveMQDestination.setPhysicalName reads it: trimmed, and a composite
    (`a.>,b.>`) split into its parts, each trimmed (empty parts skipped)."""
    parts = [p.strip() for p in d.attrs.get("physicalName", "").split(",")]
    out = []
    for k, name in enumerate(p for p in parts if p):
        if AMQ_NAME.match(name):
            e = {"name": name, "kind": d.tag, "file": str(conf.path), "line": d.line}
            out.append({**e, "composite_tail": True} if k else e)
    return out


def _routing(n: Any, conf: Any) -> dict[str, Any]:
    """The routing settings of an imported networkConnector, as the Bridge model spells them
    (the member's own file is what the broker runs; these feed the path prediction), with the
    file and line of each destination entry and routing attribute."""
    a = n.attrs
    out: dict[str, Any] = {}
    where = {"networkConnector": f"{conf.path}:{n.line}"}
    if a.get("name"):
        where["name"] = a["name"]  # the connector's own name labels it in warnings
    where.update(
        {k: f"{conf.path}:{_attr_line(n, conf, k)}" for k in (*_ROUTING_ATTRS, "networkTTL") if k in a}
    )
    out["origin"] = where
    for c in n.children:
        field = _LISTS.get(c.tag) if c.amq else None
        if field:
            out[field] = [
                e for d in c.children if d.amq and d.tag in ("topic", "queue") for e in _entries(d, conf)
            ]
    if a.get("duplex", "").lower() == "true":
        out["duplex"] = True
    if a.get("conduitSubscriptions", "").lower() == "false":
        out["conduit_subscriptions"] = False
    ttl = a.get("networkTTL", "")
    if ttl.isdigit() and 1 <= int(ttl) <= 32:
        out["network_ttl"] = int(ttl)
    attrs = {k: a[k] for k in _ROUTING_ATTRS if k in a}
    if "networkTTL" in a:
        # xbean sets attributes in name order: networkTTL last, over consumerTTL and messageTTL
        # (NetworkBridgeConfiguration.setNetworkTTL sets both); confcheck warns
        attrs.update(consumerTTL=a["networkTTL"], messageTTL=a["networkTTL"])
        where.update(
            {k: where.get("networkTTL", f"{conf.path}:{n.line}") for k in ("consumerTTL", "messageTTL")}
        )
    if attrs:
        out["attributes"] = attrs
    return out
