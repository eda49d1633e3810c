"""The topology model: broker groups, their connectors, bridges, users and TLS.

A topology is YAML validated by pydantic. `load_topology` reads it with a line-tracking loader,
so every problem is reported as `file:line: key.path: what is wrong. Fix: what to write instead`,
all problems at once. The format is documented in docs/topology.md.
"""

from __future__ import annotations

import difflib
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

Connector = Literal["openwire", "mqtt", "stomp"]
CLIENT_CONNECTORS: tuple[Connector, ...] = ("mqtt", "stomp", "openwire")
GroupKind = Literal["standalone", "pair", "trio"]
BridgeUri = Literal["masterslave", "failover", "static-list", "static", "multicast"]
NAME_PATTERN = r"^[a-z][a-z0-9-]{0,30}$"
Name = Annotated[str, Field(pattern=NAME_PATTERN)]
GROUP_SIZES = {"standalone": 1, "pair": 2, "trio": 3}
# activemq.xml elements the harness writes itself: a fragment must not repeat them.
GENERATED_ELEMENTS = (
    "networkConnectors",
    "persistenceAdapter",
    "plugins",
    "sslContext",
    "transportConnectors",
)
AMQ_NS = "http://activemq.apache.org/schema/core"
# Children <broker> accepts (activemq-core.xsd of 5.17.2; any order).
BROKER_CHILDREN = (
    "adminView",
    "brokerContext",
    "brokerObjectName",
    "consumerSystemUsage",
    "dataDirectoryFile",
    "destinationFactory",
    "destinationInterceptors",
    "destinationPolicy",
    "destinations",
    "ioExceptionHandler",
    "jmsBridgeConnectors",
    "jobSchedulerStore",
    "managementContext",
    "messageAuthorizationPolicy",
    "networkConnectorURIs",
    "networkConnectors",
    "persistenceAdapter",
    "persistenceFactory",
    "persistenceTaskRunnerFactory",
    "plugins",
    "producerSystemUsage",
    "proxyConnectors",
    "regionBroker",
    "schedulerDirectoryFile",
    "services",
    "shutdownHooks",
    "sslContext",
    "startException",
    "systemUsage",
    "taskRunnerFactory",
    "tempDataStore",
    "tmpDataDirectory",
    "transportConnectorURIs",
    "transportConnectors",
    "vmConnectorURI",
)

# networkConnector attributes a bridge may set through `attributes:` (NetworkBridgeConfiguration
# setters of 5.17.2 with scalar values; the ones the model generates itself are left out).
BRIDGE_ATTRIBUTES = (
    "advisoryAckPercentage", "advisoryForFailedForward", "advisoryPrefetchSize", "alwaysSyncSend",
    "bridgeTempDestinations", "checkDuplicateMessagesOnDuplex", "clientIdToken",
    "conduitNetworkQueueSubscriptions", "consumerPriorityBase", "consumerTTL", "destinationFilter",
    "dispatchAsync", "dynamicOnly", "gcDestinationViews", "gcSweepTime", "messageTTL", "prefetchSize",
    "remotePassword", "remoteUserName", "staticBridge", "suppressDuplicateQueueSubscriptions",
    "suppressDuplicateTopicSubscriptions", "syncDurableSubs", "useBrokerNameAsIdSees", "useCompression",
    "useVirtualDestSubs",
)  # fmt: skip

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
    port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="pinned port of member 1 (member k gets port+k-1); allocated if unset",
    )
    tls: bool = Field(default=False, description="serve this connector over TLS with the run's throwaway CA")


def _default_connectors() -> dict[Connector, ConnectorSpec]:
    return {"mqtt": ConnectorSpec(), "openwire": ConnectorSpec()}


class Group(Strict):
    """A standalone broker, or a master/slave pair/trio sharing one KahaDB store."""

    name: Name
    kind: GroupKind = "pair"
    connectors: dict[Connector, ConnectorSpec] = Field(default_factory=lambda: _default_connectors())
    lock_keep_alive_ms: int = Field(
        default=2000, ge=0, description="kahaDB lockKeepAlivePeriod (ActiveMQ: 0)"
    )
    lock_acquire_sleep_ms: int = Field(
        default=1000, ge=100, description="shared-file-locker lockAcquireSleepInterval (ActiveMQ: 10000)"
    )
    xml_fragment: str | None = Field(default=None, description="extra XML inserted inside <broker>")
    xml_file: str | None = Field(
        default=None, description="a whole activemq.xml (Jinja2 template) used instead"
    )

    @field_validator("connectors", mode="before")
    @classmethod
    def _list_form(cls, v: Any) -> Any:
        # `connectors: [mqtt, openwire]` is shorthand for allocated ports; `mqtt:` (null) too.
        if isinstance(v, list):
            out: dict[Any, Any] = {}
            for c in v:
                if isinstance(c, dict) and len(c) == 1:
                    out.update({k: (val or {}) for k, val in c.items()})
                else:
                    out[c] = {}
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
    network_ttl: int = Field(default=1, ge=1, le=32)
    conduit_subscriptions: bool = True
    decrease_network_consumer_priority: bool = False
    from_members: Literal["all", "first", "others"] = "all"
    target_members: Literal["all", "first"] = "all"
    reconnect_delay_ms: int | None = Field(
        default=None, ge=10, description="static/masterslave discovery: max delay between reconnect attempts"
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


class Topology(Strict):
    name: Name
    description: str = ""
    groups: list[Group] = Field(min_length=1)
    bridges: list[Bridge] = Field(default_factory=list)
    users: list[User] = Field(default_factory=list)

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


def check_fragment(fragment: str) -> list[tuple[str, str]]:
    """Problems of a user's activemq.xml fragment (well-formed, no generated elements)."""
    try:
        root = ET.fromstring(f'<broker xmlns="{AMQ_NS}">{fragment}</broker>')
    except ET.ParseError as e:
        line, col = e.position
        return [
            (
                f"not well-formed XML (fragment line {line}, column {col}: {str(e).split(':')[0]})",
                "close every element and escape & and < as &amp; and &lt;",
            )
        ]
    out = []
    for child in root:
        ns, _, local = child.tag.rpartition("}")
        if ns.lstrip("{") == AMQ_NS and local not in BROKER_CHILDREN:
            close = difflib.get_close_matches(local, BROKER_CHILDREN, n=1)
            out.append(
                (
                    f"<{local}> is not an element <broker> accepts",
                    (f"did you mean <{close[0]}>? " if close else "")
                    + "use a child element of <broker> from activemq-core.xsd (e.g. destinationPolicy, "
                    "systemUsage, services)",
                )
            )
        elif local in GENERATED_ELEMENTS:
            out.append(
                (
                    f"<{local}> is generated by the harness (from connectors, bridges, users, tls)",
                    "express it in the topology, or use xml_file for a whole activemq.xml",
                )
            )
    return out


# -- loading -------------------------------------------------------------------------------------

_FIELD_HINTS: dict[str, str] = {
    "name": "add `name: <lowercase-name>`",
    "groups": "add `groups:` with at least one `- name: <group>`",
    "from": "add `from: <group>`",
    "to": "add `to: <group>`",
    "password": "add `password: <secret>`",
}


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The pydantic model whose keys live at `loc` (for spelling suggestions)."""
    models: dict[str, type[BaseModel]] = {"groups": Group, "bridges": Bridge, "users": User}
    model: type[BaseModel] | None = Topology
    i = 0
    while i < len(loc) and model is not None:
        part = loc[i]
        if model is Topology and part in ("groups", "bridges", "users"):
            model = models[str(part)]
            i += 2
            continue
        if model is Group and part == "connectors":
            model = ConnectorSpec
            i += 2
            continue
        return None
    return model if i == len(loc) else None


def _keys_of(model: type[BaseModel]) -> list[str]:
    return [f.alias or n for n, f in model.model_fields.items()]


def _problem_from_error(e: Any) -> list[Problem]:
    loc: Loc = tuple(p for p in e["loc"] if p != "[key]")
    etype = e["type"]
    ctx = e.get("ctx") or {}
    inner = ctx.get("error")
    if isinstance(inner, _Problems):
        return [Problem(loc + p.loc, p.message, p.fix) for p in inner.problems]
    msg = str(e["msg"]).removeprefix("Value error, ")
    value = e.get("input")
    fix = ""
    if etype == "extra_forbidden":
        model = _model_at(loc[:-1])
        known = _keys_of(model) if model else []
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        msg = f"unknown key {loc[-1]!r}"
        fix = (f"did you mean {close[0]!r}? " if close else "") + (
            f"known keys here: {', '.join(known)}" if known else "remove it"
        )
    elif etype == "missing":
        msg = "required key is missing"
        fix = _FIELD_HINTS.get(str(loc[-1]), f"add `{loc[-1]}:`")
    elif etype == "literal_error":
        expected = str(ctx.get("expected", "")).replace("'", "")
        msg = f"unknown connector {value!r}" if "[key]" in e["loc"] else f"{value!r} is not allowed here"
        close = difflib.get_close_matches(
            str(value), [x.strip() for x in expected.replace(" or ", ",").split(",")], n=1
        )
        fix = (f"did you mean {close[0]!r}? " if close else "") + f"use one of {expected}"
    elif etype == "string_pattern_mismatch":
        if loc and loc[-1] == "name" and len(loc) >= 1 and loc[0] == "users":
            fix = "user names cannot contain spaces or commas"
        else:
            fix = (
                "use lowercase letters, digits and '-', starting with a letter, at most 31 characters "
                "(it becomes broker and file names)"
            )
        msg = f"{value!r} is not a valid name"
    elif etype in ("int_parsing", "int_type", "int_from_float"):
        fix = "write a whole number"
    elif etype in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        op = next(k for k in ("ge", "le", "gt", "lt") if k in ctx)
        fix = f"use a value {dict(ge='>=', le='<=', gt='>', lt='<')[op]} {ctx[op]}"
        msg = f"{value!r} is out of range"
    elif etype in ("bool_parsing", "bool_type"):
        fix = "write true or false"
    elif etype in ("string_type", "string_too_short"):
        fix = "write a non-empty text value (quote it if YAML reads it as a number or boolean)"
    elif etype in ("list_type", "too_short"):
        fix = "write a YAML list with at least one `- ` item" if etype == "too_short" else "write a YAML list"
    elif etype in ("dict_type", "model_type", "model_attributes_type"):
        fix = "write a mapping of `key: value` lines here"
    return [Problem(loc, msg, fix)]


class _LineMap:
    """Line numbers of keys and items in a YAML document, by key path."""

    def __init__(self) -> None:
        self.lines: dict[Loc, int] = {}
        self.problems: list[Problem] = []

    def walk(self, node: yaml.Node, loc: Loc = ()) -> None:
        self.lines.setdefault(loc, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for k, v in node.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else str(k)
                line = k.start_mark.line + 1
                if key in seen:
                    self.problems.append(
                        Problem(
                            loc + (key,),
                            f"key {key!r} appears twice (first on line "
                            f"{seen[key]}); YAML would silently keep the last one",
                            "remove one of them",
                            line,
                        )
                    )
                seen.setdefault(key, line)
                self.lines[loc + (key,)] = line
                self.walk(v, loc + (key,))
                # A value's own line (e.g. the first line of a block scalar).
                self.lines[loc + (key, "<value>")] = v.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self.lines[loc + (i,)] = item.start_mark.line + 1
                self.walk(item, loc + (i,))

    def line_of(self, loc: Loc) -> int | None:
        loc = tuple(loc)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get(())


def _report(source: str, problems: list[Problem]) -> TopologyError:
    n = len(problems)
    head = f"{source}: invalid topology ({n} problem{'s' if n != 1 else ''})"
    return TopologyError("\n".join([head] + ["  " + p.render(source) for p in problems]), problems)


def parse_topology(data: Any, source: str = "<topology>", lines: _LineMap | None = None) -> Topology:
    """Validate already-parsed data; every problem is reported (with its line when `lines` is given)."""
    problems = list(lines.problems) if lines else []
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        p = Problem(
            (),
            f"a topology must be a mapping with `name` and `groups`, but the document is {kind}",
            "start the file with `name: <topology-name>` and a `groups:` list (see docs/topology.md)",
            lines.line_of(()) if lines else None,
        )
        raise _report(source, problems + [p])
    topology: Topology | None = None
    try:
        topology = Topology.model_validate(data)
    except ValidationError as err:
        for e in err.errors():
            problems += _problem_from_error(e)
    if lines:
        for p in problems:
            if p.line is None:
                p.line = _fragment_line(p, lines) or lines.line_of(p.loc)
    if problems:
        problems.sort(key=lambda p: p.line or 0)
        raise _report(source, problems)
    assert topology is not None
    return topology


def _fragment_line(p: Problem, lines: _LineMap) -> int | None:
    """For an XML fragment problem, the file line of the XML error."""
    if not p.loc or p.loc[-1] != "xml_fragment":
        return None
    m = re.search(r"fragment line (\d+)", p.message)
    start = lines.lines.get(p.loc + ("<value>",))
    if m and start:
        # A block scalar (`|`) starts on the line after the key's indicator.
        key_line = lines.lines.get(p.loc, start)
        first = start + 1 if start == key_line else start
        return first + int(m.group(1)) - 1
    return None


def _resolve_files(data: Any, base: Path) -> None:
    """Make xml_file paths absolute (relative to the topology file) and check they exist."""
    if not isinstance(data, dict) or not isinstance(data.get("groups"), list):
        return
    for g in data["groups"]:
        if isinstance(g, dict) and isinstance(g.get("xml_file"), str):
            p = Path(g["xml_file"]).expanduser()
            g["xml_file"] = str(p if p.is_absolute() else (base / p).resolve())


def _file_problems(data: Any, lines: _LineMap) -> list[Problem]:
    out: list[Problem] = []
    if not isinstance(data, dict) or not isinstance(data.get("groups"), list):
        return out
    for i, g in enumerate(data["groups"]):
        if not (isinstance(g, dict) and isinstance(g.get("xml_file"), str)):
            continue
        loc: Loc = ("groups", i, "xml_file")
        path = Path(g["xml_file"])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            out.append(
                Problem(
                    loc,
                    f"cannot read {path} ({e.strerror})",
                    "give a path relative to the topology file, or an absolute one",
                    lines.line_of(loc),
                )
            )
            continue
        try:
            ET.fromstring(re.sub(r"\{[{%#].*?[}%#]\}", "x", text, flags=re.S))
        except ET.ParseError as e:
            out.append(
                Problem(
                    loc,
                    f"{path} is not well-formed XML (line {e.position[0]})",
                    "fix the file; Jinja2 {{ ... }} placeholders are allowed",
                    lines.line_of(loc),
                )
            )
    return out


def loads_topology(text: str, source: str = "<topology>", base_dir: Path | None = None) -> Topology:
    """Parse and validate topology YAML text."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        line = mark.line + 1 if mark else None
        problem = getattr(e, "problem", None) or str(e)
        fix = "fix the YAML syntax (indent with spaces, not tabs; quote values containing ': ' or '#')"
        raise _report(source, [Problem((), f"not valid YAML: {problem}", fix, line)]) from None
    finally:
        loader.dispose()
    lines = _LineMap()
    if node is not None:
        lines.walk(node)
    if base_dir is not None:
        _resolve_files(data, base_dir)
    lines.problems += _file_problems(data, lines)
    return parse_topology(data, source, lines)


def load_topology(path_or_name: str | Path) -> Topology:
    """Load a topology file, or a built-in example by name (`pair`, `network-of-pairs`, ...)."""
    path = Path(path_or_name)
    if not path.exists() and str(path_or_name) in builtin_names():
        return builtin_topology(str(path_or_name))
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise TopologyError(
            f"{path}: cannot read topology file ({e.strerror}). Fix: give the path of a "
            f"YAML file, or a built-in name: {', '.join(builtin_names())}"
        ) from None
    except UnicodeDecodeError:
        raise TopologyError(f"{path}: not a text file. Fix: save the topology as UTF-8 YAML") from None
    return loads_topology(text, str(path), path.resolve().parent)


def builtin_names() -> list[str]:
    root = resources.files("harness") / "topologies"
    return sorted(p.name.removesuffix(".yaml") for p in root.iterdir() if p.name.endswith(".yaml"))


def builtin_path(name: str) -> Path:
    return Path(str(resources.files("harness") / "topologies" / f"{name}.yaml"))


def builtin_topology(name: str) -> Topology:
    f = resources.files("harness") / "topologies" / f"{name}.yaml"
    if not f.is_file():
        close = difflib.get_close_matches(name, builtin_names(), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise TopologyError(
            f"no built-in topology {name!r}. Fix: {hint}built-ins: {', '.join(builtin_names())}"
        )
    return loads_topology(f.read_text(encoding="utf-8"), f"built-in {name}", Path(str(f)).parent)
