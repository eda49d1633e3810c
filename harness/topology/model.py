"""The topology model: broker groups, their connectors, bridges, users and TLS (pydantic).

Validation problems carry a key path (`Problem`); harness.topology.loader maps them to file lines.
The format is documented in docs/topology.md. The building blocks are in harness.topology.parts,
the checks across them in harness.topology.crosscheck; their names stay importable from here.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from harness.topology.crosscheck import bridge_sources, bridge_targets, cross_checks
from harness.topology.parts import (
    CLIENT_CONNECTORS,
    GROUP_SIZES,
    MAX_MS,
    NAME_PATTERN,
    Bridge,
    BridgeUri,
    Connector,
    ConnectorSpec,
    Group,
    GroupKind,
    Loc,
    Name,
    PathSpec,
    Problem,
    Strict,
    TopologyError,
    User,
    _Problems,
    dotted,
)
from harness.topology.traffic import Family, Traffic

__all__ = [
    "CLIENT_CONNECTORS",
    "GROUP_SIZES",
    "MAX_MS",
    "NAME_PATTERN",
    "Bridge",
    "BridgeUri",
    "Connector",
    "Family",
    "ConnectorSpec",
    "Group",
    "GroupKind",
    "Loc",
    "Name",
    "PathSpec",
    "Problem",
    "Strict",
    "Topology",
    "Traffic",
    "TopologyError",
    "User",
    "bridge_sources",
    "bridge_targets",
    "dotted",
]


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
    traffic: Traffic | None = Field(
        default=None,
        description="the topic families the deployment carries (default: the Stratos families, "
        "harness.topology.traffic)",
    )

    @model_validator(mode="after")
    def _references(self) -> Topology:
        problems = list(cross_checks(self))
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
