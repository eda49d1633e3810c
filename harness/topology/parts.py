"""The topology model's building blocks: broker groups, their connectors, bridges, users and
delivery paths (pydantic), and `Problem`, a validation problem with its key path.

harness.topology.model assembles them into a Topology; the format is documented in docs/topology.md.
"""

from __future__ import annotations

import difflib
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

from harness.topology.activemq import (
    BRIDGE_ATTRIBUTES,
    MAX_CONNECTIONS,
    MAX_FRAME,
    MIN_FRAME,
    check_fragment,
    check_transport_options,
)

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
            out += ("." if out else "") + key_text(part)
    return out


def key_text(part: object) -> str:
    """A key as an error message shows it: quoted when it is empty, padded or holds a line break
    or other unprintable character (a message stays one line)."""
    text = str(part)
    return text if text and text.isprintable() and text.strip() == text else repr(text)


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
    nio: StrictBool = Field(
        default=False,
        description="serve it with ActiveMQ's NIO transport (nio://, mqtt+nio://, stomp+nio://): a "
        "shared thread pool instead of a thread per connection, for thousands of connections",
    )
    maximum_connections: StrictInt | None = Field(
        default=None,
        ge=1,
        le=MAX_CONNECTIONS,
        description="the connector's maximumConnections (ActiveMQ: unlimited; its stock file: 1000)",
    )
    max_frame_size: StrictInt | None = Field(
        default=None,
        ge=MIN_FRAME,
        le=MAX_FRAME,
        description="wireFormat.maxFrameSize in bytes (ActiveMQ: 256 MB for MQTT, its stock file 100 MB)",
    )
    transport: dict[str, StrictInt | StrictBool | str] = Field(
        default_factory=dict,
        description="options of each accepted connection's transport, written `transport.<key>` "
        "(the TCP transport reference's: soTimeout, closeAsync, backlog, ...)",
    )

    @field_validator("transport")
    @classmethod
    def _transport_options(cls, v: dict[str, int | bool | str]) -> dict[str, int | bool | str]:
        problems = [Problem((k,), m, f) for k, m, f in check_transport_options(v)]
        if problems:
            raise _Problems(problems)
        return v


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


#: an ActiveMQ destination name: dot-separated levels, `*` one level, `>` the rest
AMQ_NAME_PATTERN = r"^(?:[A-Za-z0-9_$:#+-]+|\*)(?:\.(?:[A-Za-z0-9_$:#+-]+|\*))*(?:\.>)?$|^>$"
#: entries per destination list: what an ops file holds (ActiveMQ sets no limit); past it, one error
MAX_DESTINATIONS = 10_000
DEST_LISTS = (
    "excluded_destinations",
    "dynamically_included_destinations",
    "statically_included_destinations",
)


class Destination(Strict):
    """One entry of a bridge's destination list (docs/topology.md): `topology.>` (a topic) or
    `queue://jobs.>`; `file`/`line` are set when the entry comes from an imported activemq.xml."""

    name: str = Field(min_length=1, max_length=200, pattern=AMQ_NAME_PATTERN)
    kind: Literal["topic", "queue"] = "topic"
    file: str | None = Field(default=None, exclude=True)
    line: StrictInt | None = Field(default=None, exclude=True)
    #: a later part of a composite entry (`a.>,b.>`): ActiveMQ's advisory filter for it has no
    #: prefix (NetworkBridgeConfiguration.getDestinationFilter), so it makes no dynamic demand
    composite_tail: bool = Field(default=False, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, v: Any) -> Any:
        if isinstance(v, str):
            kind, sep, name = v.partition("://")
            return {"kind": kind, "name": name} if sep else {"name": v}
        return v


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
    excluded_destinations: list[Destination] = Field(default_factory=list, max_length=MAX_DESTINATIONS)
    dynamically_included_destinations: list[Destination] = Field(
        default_factory=list, max_length=MAX_DESTINATIONS
    )
    statically_included_destinations: list[Destination] = Field(
        default_factory=list, max_length=MAX_DESTINATIONS
    )
    origin: dict[str, str] = Field(
        default_factory=dict,
        exclude=True,
        description="set on import: 'file:line' of the networkConnector and of its attributes",
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
    family: Name | None = Field(default=None, description="one traffic family (default: every family)")
    deliver: bool = True
