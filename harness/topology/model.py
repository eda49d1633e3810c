"""The topology model: broker groups, their connectors, bridges, users and TLS (pydantic).

Validation problems carry a key path (`Problem`); harness.topology.loader maps them to file lines.
The format is documented in docs/topology.md.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    field_validator,
    model_validator,
)

from harness.topology.activemq import BRIDGE_ATTRIBUTES, check_fragment

Connector = Literal["openwire", "mqtt", "stomp"]
CLIENT_CONNECTORS: tuple[Connector, ...] = ("mqtt", "stomp", "openwire")
GroupKind = Literal["standalone", "pair", "trio"]
BridgeUri = Literal["masterslave", "failover", "static-list", "static", "multicast"]
NAME_PATTERN = r"^[a-z][a-z0-9-]{0,30}$"
Name = Annotated[str, Field(pattern=NAME_PATTERN)]
GROUP_SIZES = {"standalone": 1, "pair": 2, "trio": 3}
MAX_MS = 86_400_000  # a day: timing fields above it are typos (ActiveMQ reads them as Java longs/ints)

Loc = tuple[str | int, ...]


class TopologyError(ValueError):
    """A topology file or model that cannot be used; the message says where and how to fix it."""

    def __init__(self, message: str, problems: list[Problem] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []


class Problem:
    """One thing wrong with a topology: where (a key path), what, and the fix."""

    def __init__(self, loc: Loc, message: str, fix: str = "", line: int | None = None) -> None:
        self.loc = tuple(loc)
        self.message = message
        self.fix = fix
        self.line = line

    def __repr__(self) -> str:
        return f"Problem({self.loc!r}, {self.message!r}, {self.fix!r}, line={self.line})"

    def render(self, source: str) -> str:
        where = f"{source}:{self.line}" if self.line else source
        key = dotted(self.loc) or "(top level)"
        fix = f" Fix: {self.fix}" if self.fix else ""
        return f"{where}: {key}: {self.message}.{fix}"


class _Problems(ValueError):
    """Raised inside validators: carries problems with locations relative to the model."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__(
            "; ".join(f"{dotted(p.loc) or '(top level)'}: {p.message}. Fix: {p.fix}" for p in problems)
        )
        self.problems = problems


def dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ConnectorSpec(Strict):
    port: StrictInt | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="pinned port of member 1 (member k gets port+k-1); allocated if unset",
    )
    tls: StrictBool = Field(
        default=False, description="serve this connector over TLS with the run's throwaway CA"
    )


def _hashable(x: Any) -> bool:
    return isinstance(x, (str, int, float, bool)) or x is None


def _default_connectors() -> dict[Connector, ConnectorSpec]:
    return {"mqtt": ConnectorSpec(), "openwire": ConnectorSpec()}


class Group(Strict):
    """A standalone broker, or a master/slave pair/trio sharing one KahaDB store."""

    name: Name
    kind: GroupKind = "pair"
    connectors: dict[Connector, ConnectorSpec] = Field(default_factory=lambda: _default_connectors())
    lock_keep_alive_ms: StrictInt = Field(
        default=2000, ge=0, le=MAX_MS, description="kahaDB lockKeepAlivePeriod (ActiveMQ: 0)"
    )
    lock_acquire_sleep_ms: StrictInt = Field(
        default=1000,
        ge=100,
        le=MAX_MS,
        description="shared-file-locker lockAcquireSleepInterval (ActiveMQ: 10000)",
    )
    store: Literal["shared", "own"] = Field(
        default="shared",
        description="shared: one KahaDB for the group (master/slave); own: each member its own, as a "
        "deployment whose members do not share a store runs (every member a master)",
    )
    xml_fragment: str | None = Field(default=None, description="extra XML inserted inside <broker>")
    xml_file: str | None = Field(
        default=None, description="a whole activemq.xml (Jinja2 template) used instead"
    )
    config: str | list[str] | None = Field(
        default=None,
        description="the deployment's own activemq.xml, used as it is (one file for every member, "
        "or a list: one per member); see harness/topology/imported.py",
    )

    @field_validator("connectors", mode="before")
    @classmethod
    def _list_form(cls, v: Any) -> Any:
        # `connectors: [mqtt, openwire]` is shorthand for allocated ports; `mqtt:` (null) too.
        if isinstance(v, list):
            out: dict[Any, Any] = {}
            for i, c in enumerate(v):
                item = c if isinstance(c, dict) and len(c) == 1 else {c: None} if _hashable(c) else None
                for k, val in (item or {}).items():
                    if k in out:
                        fix = "list each connector once"
                        raise _Problems([Problem((i,), f"connector {k!r} is listed twice", fix)])
                    out[k] = val or {}
                if item is None:
                    return v  # not a connector name: pydantic reports the type
            return out
        if isinstance(v, dict):
            return {k: ({} if val is None else val) for k, val in v.items()}
        return v

    @field_validator("connectors")
    @classmethod
    def _needs_openwire(cls, v: dict[str, ConnectorSpec]) -> dict[str, ConnectorSpec]:
        if "openwire" not in v:
            raise _Problems(
                [
                    Problem(
                        (),
                        "every group needs an 'openwire' connector (bridges and readiness checks use it)",
                        "add `openwire` to the group's connectors",
                    )
                ]
            )
        return v

    @field_validator("xml_fragment")
    @classmethod
    def _fragment(cls, v: str | None) -> str | None:
        if v is not None:
            problems = [Problem((), m, f) for m, f in check_fragment(v)]
            if problems:
                raise _Problems(problems)
        return v

    @model_validator(mode="after")
    def _config(self) -> Group:
        if self.config is None:
            return self
        if self.xml_file is not None or self.xml_fragment is not None:
            raise _Problems(
                [
                    Problem(
                        ("config",),
                        "config is the whole activemq.xml already, so xml_file/xml_fragment would be ignored",
                        "keep config, and drop xml_file and xml_fragment",
                    )
                ]
            )
        if isinstance(self.config, list) and len(self.config) != self.size:
            raise _Problems(
                [
                    Problem(
                        ("config",),
                        f"a {self.kind} has {self.size} member(s) but config lists "
                        f"{len(self.config)} file(s)",
                        "give one file for every member, in member order, or a single file for all",
                    )
                ]
            )
        return self

    @model_validator(mode="after")
    def _exclusive(self) -> Group:
        if self.xml_fragment is not None and self.xml_file is not None:
            raise _Problems(
                [
                    Problem(
                        ("xml_fragment",),
                        "xml_fragment and xml_file are exclusive (a whole file "
                        "replaces the generated one, so a fragment would be ignored)",
                        "keep one of them",
                    )
                ]
            )
        return self

    @property
    def size(self) -> int:
        return GROUP_SIZES[self.kind]

    def connector(self, name: str) -> ConnectorSpec:
        """The spec of connector `name` (KeyError if the group has none)."""
        for c, spec in self.connectors.items():
            if c == name:
                return spec
        raise KeyError(name)

    def member_names(self) -> list[str]:
        return [f"{self.name}-{i}" for i in range(1, self.size + 1)]


class Bridge(Strict):
    """A network connector from members of one group to another group.

    uri: `masterslave` (masterslave:(...), the recommended form), `failover`
    (static:(failover:(...)?randomize=false&maxReconnectAttempts=0), the pre-5.6 spelling),
    `static-list` (the seed-002 anti-pattern static:(master,slave)), `static` (static:(first
    target member) only), `multicast` (discovery over a per-run multicast group).
    from_members: which members of the source group carry the bridge (only the current master of
    a shared-store group runs its connectors). target_members: which members the URI names.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    source: Name = Field(alias="from")
    target: Name = Field(alias="to")
    name: Name | None = Field(default=None, description="connector name prefix; default nc<k>")
    uri: BridgeUri = "masterslave"
    duplex: bool = False
    network_ttl: StrictInt = Field(default=1, ge=1, le=32)
    conduit_subscriptions: bool = True
    decrease_network_consumer_priority: bool = False
    from_members: Literal["all", "first", "others"] = "all"
    target_members: Literal["all", "first"] = "all"
    reconnect_delay_ms: StrictInt | None = Field(
        default=None,
        ge=10,
        le=MAX_MS,
        description="static/masterslave discovery: max delay between reconnect attempts",
    )
    durable_topics: bool = Field(
        default=False,
        description="keep topic messages for durable subscribers across bridge outages: "
        'syncDurableSubs="true" plus <durableDestinations><topic physicalName=">"/>',
    )
    attributes: dict[str, str | int | bool] = Field(
        default_factory=dict, description="further networkConnector attributes, e.g. {syncDurableSubs: true}"
    )

    @field_validator("attributes")
    @classmethod
    def _known_attributes(cls, v: dict[str, str | int | bool]) -> dict[str, str | int | bool]:
        problems = []
        for k in v:
            if k not in BRIDGE_ATTRIBUTES:
                close = difflib.get_close_matches(k, BRIDGE_ATTRIBUTES, n=1)
                generated = k in (
                    "name",
                    "uri",
                    "duplex",
                    "networkTTL",
                    "conduitSubscriptions",
                    "decreaseNetworkConsumerPriority",
                    "userName",
                    "password",
                )
                fix = (
                    "set it with the bridge's own key (duplex, network_ttl, ...)"
                    if generated
                    else (f"did you mean {close[0]!r}? " if close else "")
                    + "see docs/topology.md for the list"
                )
                problems.append(
                    Problem((k,), f"{k!r} is not a networkConnector attribute the harness passes on", fix)
                )
        if problems:
            raise _Problems(problems)
        return v

    @model_validator(mode="after")
    def _durable_topics(self) -> Bridge:
        if self.durable_topics and "syncDurableSubs" in self.attributes:
            raise _Problems(
                [
                    Problem(
                        ("attributes", "syncDurableSubs"),
                        "durable_topics already sets syncDurableSubs",
                        "drop syncDurableSubs from attributes",
                    )
                ]
            )
        return self


class User(Strict):
    name: str = Field(min_length=1, pattern=r"^[^\s,]+$")
    password: str = Field(min_length=1)
    groups: list[str] = Field(default_factory=lambda: ["users"], min_length=1)
    bridge: bool = Field(default=False, description="bridges log in as this user (default: the first user)")


class PathSpec(Strict):
    """A declared delivery path: publishers on `from`, subscribers on `to` (`deliver: false` for
    traffic a team keeps apart on purpose)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    source: Name = Field(alias="from")
    target: Name = Field(alias="to")
    deliver: bool = True


class Topology(Strict):
    name: Name
    description: str = ""
    groups: list[Group] = Field(min_length=1)
    bridges: list[Bridge] = Field(default_factory=list)
    users: list[User] = Field(default_factory=list)
    hosts: dict[str, str] = Field(
        default_factory=dict,
        description="production `host:port` (or `host`) -> member, for the networkConnector URIs "
        "of imported configs",
    )
    paths: list[PathSpec] | None = Field(
        default=None,
        description="the delivery paths that must (or must not) deliver; default: every pair of "
        "connected groups must",
    )

    @model_validator(mode="after")
    def _references(self) -> Topology:
        problems = list(_cross_checks(self))
        if problems:
            raise _Problems(problems)
        return self

    def group(self, name: str) -> Group:
        for g in self.groups:
            if g.name == name:
                return g
        raise KeyError(name)

    def broker_names(self) -> list[str]:
        return [m for g in self.groups for m in g.member_names()]

    @property
    def uses_tls(self) -> bool:
        return any(c.tls for g in self.groups for c in g.connectors.values())

    @property
    def uses_multicast(self) -> bool:
        return any(b.uri == "multicast" for b in self.bridges)

    def bridge_user(self) -> User | None:
        for u in self.users:
            if u.bridge:
                return u
        return self.users[0] if self.users else None

    def redacted(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", by_alias=True)
        for u in data.get("users", []):
            u["password"] = "***"
        return data


def bridge_sources(topology: Topology, spec: Bridge) -> list[str]:
    names = topology.group(spec.source).member_names()
    return {"all": names, "first": names[:1], "others": names[1:]}[spec.from_members]


def bridge_targets(topology: Topology, spec: Bridge) -> list[str]:
    names = topology.group(spec.target).member_names()
    return names if spec.target_members == "all" else names[:1]


def _cross_checks(t: Topology) -> Iterator[Problem]:
    names = [g.name for g in t.groups]
    seen: dict[str, int] = {}
    for i, g in enumerate(t.groups):
        if g.name in seen:
            yield Problem(
                ("groups", i, "name"),
                f"group name {g.name!r} is already used by groups[{seen[g.name]}]",
                "give every group a unique name",
            )
        seen.setdefault(g.name, i)
    members = {m: g.name for g in t.groups for m in g.member_names()}
    for i, g in enumerate(t.groups):
        if g.name in members and members[g.name] != g.name:
            yield Problem(
                ("groups", i, "name"),
                f"group name {g.name!r} is also the name of a broker of group "
                f"{members[g.name]!r} (members are named <group>-1, <group>-2, ...)",
                "rename the group so fault targets stay unambiguous",
            )
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
    for i, b in enumerate(t.bridges):
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
            continue
        if b.source == b.target:
            yield Problem(
                ("bridges", i),
                f"a bridge must join two different groups (from and to are both {b.source!r})",
                "point `to` at another group",
            )
            continue
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
    yield from _path_checks(t, names)
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


def _path_checks(t: Topology, names: list[str]) -> Iterator[Problem]:
    seen: dict[tuple[str, str], int] = {}
    for i, p in enumerate(t.paths or []):
        for end, ref in (("from", p.source), ("to", p.target)):
            if ref not in names:
                close = difflib.get_close_matches(ref, names, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                yield Problem(
                    ("paths", i, end), f"unknown group {ref!r}", f"{hint}use one of: {', '.join(names)}"
                )
        key = (p.source, p.target)
        if key in seen:
            yield Problem(
                ("paths", i),
                f"path {p.source} -> {p.target} is already declared by paths[{seen[key]}]",
                "declare each path once",
            )
        seen.setdefault(key, i)
