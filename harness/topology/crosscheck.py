"""The checks across a topology's parts, run when a Topology is built: unique names, pinned ports
that do not collide, bridges between known groups that can carry their uri, hosts and users.

Each check yields Problems (a key path, what is wrong, the fix); the Topology raises them together.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import Protocol

from harness.topology.parts import Bridge, Group, Loc, PathSpec, Problem, User
from harness.topology.traffic import Traffic, families
from spark_analysis.mqtt import matches as mqtt_matches


class TopologyShape(Protocol):
    """What the checks read of a Topology (harness.topology.model builds on this module)."""

    groups: list[Group]
    bridges: list[Bridge]
    users: list[User]
    hosts: dict[str, str]
    paths: list[PathSpec] | None
    traffic: Traffic | None

    def group(self, name: str) -> Group: ...


def bridge_sources(topology: TopologyShape, spec: Bridge) -> list[str]:
    names = topology.group(spec.source).member_names()
    return {"all": names, "first": names[:1], "others": names[1:]}[spec.from_members]


def bridge_targets(topology: TopologyShape, spec: Bridge) -> list[str]:
    names = topology.group(spec.target).member_names()
    return names if spec.target_members == "all" else names[:1]


def cross_checks(t: TopologyShape) -> Iterator[Problem]:
    names = [g.name for g in t.groups]
    members = {m: g.name for g in t.groups for m in g.member_names()}
    yield from _group_names(t, members)
    yield from _pinned_ports(t)
    for i, b in enumerate(t.bridges):
        yield from _bridge_checks(t, i, b, names)
    yield from _path_checks(t, names)
    yield from _traffic_checks(t, names)
    yield from _bridge_clashes(t, names)
    yield from _host_checks(t, members)
    yield from _user_checks(t)


def _group_names(t: TopologyShape, members: dict[str, str]) -> Iterator[Problem]:
    seen: dict[str, int] = {}
    for i, g in enumerate(t.groups):
        if g.name in seen:
            yield Problem(
                ("groups", i, "name"),
                f"group name {g.name!r} is already used by groups[{seen[g.name]}]",
                "give every group a unique name",
            )
        seen.setdefault(g.name, i)
    for i, g in enumerate(t.groups):
        if g.name in members and members[g.name] != g.name:
            yield Problem(
                ("groups", i, "name"),
                f"group name {g.name!r} is also the name of a broker of group "
                f"{members[g.name]!r} (members are named <group>-1, <group>-2, ...)",
                "rename the group so fault targets stay unambiguous",
            )


def _pinned_ports(t: TopologyShape) -> Iterator[Problem]:
    pinned: dict[int, str] = {}
    for i, g in enumerate(t.groups):
        for c, spec in g.connectors.items():
            if spec.port is None:
                continue
            if spec.port + g.size - 1 > 65535:
                yield Problem(
                    ("groups", i, "connectors", c, "port"),
                    f"port {spec.port} leaves no room for {g.size} members (member k uses port+k-1)",
                    "pin a lower port",
                )
            for k in range(g.size):
                p = spec.port + k
                owner = f"{g.name}-{k + 1} {c}"
                if p in pinned:
                    yield Problem(
                        ("groups", i, "connectors", c, "port"),
                        f"port {p} ({owner}) is already pinned for {pinned[p]}",
                        "pin distinct ports (a pair/trio uses port, port+1, port+2) or leave them unset",
                    )
                    break
                pinned[p] = owner


def _bridge_checks(t: TopologyShape, i: int, b: Bridge, names: list[str]) -> Iterator[Problem]:
    ok = True
    for end, ref in (("from", b.source), ("to", b.target)):
        if ref not in names:
            ok = False
            close = difflib.get_close_matches(ref, names, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            yield Problem(
                ("bridges", i, end),
                f"unknown group {ref!r}",
                f"{hint}use one of the groups: {', '.join(names)}",
            )
    if not ok:
        return
    if b.source == b.target:
        yield Problem(
            ("bridges", i),
            f"a bridge must join two different groups (from and to are both {b.source!r})",
            "point `to` at another group",
        )
        return
    yield from _bridge_members(t, i, b)
    yield from _multicast_checks(i, b)


def _bridge_members(t: TopologyShape, i: int, b: Bridge) -> Iterator[Problem]:
    """The bridge's ends have the brokers its from_members and uri need."""
    src, tgt = t.group(b.source), t.group(b.target)
    if b.from_members == "others" and src.size == 1:
        yield Problem(
            ("bridges", i, "from_members"),
            f"group {src.name!r} is standalone: it has no 'others' (slaves) to carry the bridge",
            "use from_members: all or first",
        )
    n_targets = len(bridge_targets(t, b))
    if b.uri in ("masterslave", "failover", "static-list") and n_targets < 2:
        why = (
            f"group {tgt.name!r} is standalone"
            if tgt.size == 1
            else "target_members: first names only one broker"
        )
        yield Problem(
            ("bridges", i, "uri"),
            f"uri {b.uri!r} needs at least two target brokers, but {why}",
            "use uri: static for a single target broker, or target_members: all with a pair",
        )


def _multicast_checks(i: int, b: Bridge) -> Iterator[Problem]:
    if b.uri == "multicast" and b.target_members != "all":
        yield Problem(
            ("bridges", i, "target_members"),
            "multicast bridges reach whichever member of the "
            "target group serves (it is discovered), so target_members does not apply",
            "remove target_members",
        )
    if b.uri == "multicast" and b.reconnect_delay_ms is not None:
        yield Problem(
            ("bridges", i, "reconnect_delay_ms"),
            "reconnect_delay_ms applies to static discovery only",
            "remove it, or use a static/masterslave uri",
        )


def _bridge_clashes(t: TopologyShape, names: list[str]) -> Iterator[Problem]:
    pairs: dict[tuple[str, str, str], int] = {}
    for i, b in enumerate(t.bridges):
        for s in bridge_sources(t, b) if b.source in names and b.source != b.target else []:
            key = (s, b.target, b.name or "")
            if key in pairs:
                yield Problem(
                    ("bridges", i),
                    f"broker {s} already has a bridge to group {b.target!r} "
                    f"(bridges[{pairs[key]}]); two connectors with one name clash",
                    "remove the duplicate, or give one of them a distinct `name`",
                )
            pairs.setdefault(key, i)


def _host_checks(t: TopologyShape, members: dict[str, str]) -> Iterator[Problem]:
    folded: dict[str, str] = {}
    for host, member in t.hosts.items():
        if host.lower() in folded:
            yield Problem(
                ("hosts", host),
                f"{host!r} and {folded[host.lower()]!r} differ only in case; host names are "
                "case-insensitive, so they name one production host",
                "keep one entry per host",
            )
        folded.setdefault(host.lower(), host)
        if member not in members:
            close = difflib.get_close_matches(member, list(members), n=1)
            yield Problem(
                ("hosts", host),
                f"{member!r} is not a broker of this topology",
                (f"did you mean {close[0]!r}? " if close else "")
                + f"map each production address to a member: {', '.join(members)}",
            )
        if not re.fullmatch(r"[A-Za-z0-9_.-]+(:\d{1,5})?", host):
            yield Problem(
                ("hosts", host), f"{host!r} is not a host or host:port", "write e.g. mq-b1.prod:61616"
            )


def _user_checks(t: TopologyShape) -> Iterator[Problem]:
    users = [u.name for u in t.users]
    for i, u in enumerate(t.users):
        if users.count(u.name) > 1 and users.index(u.name) != i:
            yield Problem(
                ("users", i, "name"), f"user {u.name!r} is defined twice", "keep one entry per user"
            )
    if sum(u.bridge for u in t.users) > 1:
        idx = [i for i, u in enumerate(t.users) if u.bridge][1]
        yield Problem(
            ("users", idx, "bridge"), "only one user can be the bridges' user", "set bridge: true on one user"
        )


def _path_checks(t: TopologyShape, names: list[str]) -> Iterator[Problem]:
    seen: dict[tuple[str, str, str | None], int] = {}
    fams = [f.name for f in families(t)]
    for i, p in enumerate(t.paths or []):
        if p.family is not None and p.family not in fams:
            close = difflib.get_close_matches(p.family, fams, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            yield Problem(
                ("paths", i, "family"),
                f"unknown traffic family {p.family!r}",
                f"{hint}use one of: {', '.join(fams)}",
            )
        for end, ref in (("from", p.source), ("to", p.target)):
            if ref not in names:
                close = difflib.get_close_matches(ref, names, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                yield Problem(
                    ("paths", i, end), f"unknown group {ref!r}", f"{hint}use one of: {', '.join(names)}"
                )
        key = (p.source, p.target, p.family)
        if key in seen:
            of = f" ({p.family})" if p.family else ""
            yield Problem(
                ("paths", i),
                f"path {p.source} -> {p.target}{of} is already declared by paths[{seen[key]}]",
                "declare each path once",
            )
        seen.setdefault(key, i)


def _traffic_checks(t: TopologyShape, names: list[str]) -> Iterator[Problem]:
    tr = t.traffic
    if tr is None:
        return
    refs: list[tuple[Loc, str]] = []
    if tr.controller is not None:
        refs.append((("traffic", "controller"), tr.controller))
    seen: dict[str, int] = {}
    for i, f in enumerate(tr.families or []):
        if f.name in seen:
            yield Problem(
                ("traffic", "families", i, "name"),
                f"traffic family {f.name!r} is already declared by traffic.families[{seen[f.name]}]",
                "give each family its own name",
            )
        seen.setdefault(f.name, i)
        for end, val in (("from", f.source), ("to", f.target)):
            if isinstance(val, list):
                refs += [(("traffic", "families", i, end, k), g) for k, g in enumerate(val)]
        for k, e in enumerate(f.event_topics()):
            if not mqtt_matches(f.topic, e):
                yield Problem(
                    ("traffic", "families", i, "events", k),
                    f"event topic {e!r} is not in the family's filter {f.topic!r}",
                    "name events the filter matches",
                )
    for loc, ref in refs:
        if ref not in names:
            close = difflib.get_close_matches(ref, names, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            yield Problem(loc, f"unknown group {ref!r}", f"{hint}use one of: {', '.join(names)}")
