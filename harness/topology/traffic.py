"""The traffic a deployment carries: topic families, each from its producer groups to its consumer
groups (the topology's optional `traffic:` section).

The default is the Stratos deployment (shared notes `stratos-agent-topics.md`, docs/topology.md):
the controllers (cloud controller, autoscaler, stratos manager) sit in one group, the cartridge
agents in every group; the controllers' events go to every agent, the agents' status events and
initializer requests go to the controllers. Every consumer subscribes to its family's filter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, StrictInt, field_validator

from harness.topology.parts import Name, Strict

#: `from`/`to` of a family: the controllers' group, every group, or the groups named
Ends = Literal["controller", "agents"] | list[Name]
_LEVEL = re.compile(r"^[A-Za-z0-9_-]+$")


def _mqtt_filter(v: str, wildcards: bool) -> str:
    levels = v.split("/")
    for i, lv in enumerate(levels):
        if wildcards and lv == "#" and i == len(levels) - 1:
            continue
        if wildcards and lv == "+":
            continue
        if not _LEVEL.match(lv):
            raise ValueError(
                f"{v!r}: level {lv!r} is not a plain name"
                + (
                    " ('+' a level, '#' the last level)"
                    if wildcards
                    else " (an event topic has no wildcards)"
                )
            )
    return v


class Family(Strict):
    """One family of topics (an MQTT filter), in one direction, measured with `events`."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: Name
    topic: Annotated[str, Field(min_length=1, max_length=200)]
    events: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list,
        description="the topics published to measure the family (default: <filter prefix>/BfhProbeEvent; "
        "a `+` inside the filter a `BfhProbe` level)",
        max_length=16,
    )
    source: Ends = Field(alias="from")
    target: Ends = Field(alias="to")
    qos: StrictInt = Field(default=1, ge=0, le=2)
    durable: bool = True

    @field_validator("topic")
    @classmethod
    def _topic(cls, v: str) -> str:
        return _mqtt_filter(v, wildcards=True)

    @field_validator("events")
    @classmethod
    def _events(cls, v: list[str]) -> list[str]:
        return [_mqtt_filter(e, wildcards=False) for e in v]

    def event_topics(self) -> list[str]:
        """The concrete topics a producer publishes for this family."""
        if self.events:
            return list(self.events)
        levels = self.topic.split("/")
        if levels[-1] in ("#", "+") and "+" not in levels[:-1]:
            return ["/".join([*levels[:-1], "BfhProbeEvent"])]
        # a `+` inside (`+/+/#`) or no wildcard at all: one level per `+`, the probe for `#`
        out = ["BfhProbe" if lv == "+" else lv for lv in levels if lv != "#"]
        return ["/".join(out + ["BfhProbeEvent"] if levels[-1] == "#" else out)]


class Traffic(Strict):
    controller: Name | None = Field(default=None, description="the controllers' group (default: the first)")
    families: list[Family] | None = Field(
        default=None,
        description="default: the Stratos families (DEFAULT_FAMILIES)",
        min_length=1,
        max_length=64,
    )


def _fam(name: str, topic: str, events: list[str], src: str, dst: str) -> Family:
    return Family.model_validate({"name": name, "topic": topic, "events": events, "from": src, "to": dst})


#: The Stratos 4.1.x families (stratos-agent-topics.md). Agents subscribe topology/#, instance/#,
#: tenant/#, application/signup/# (PCA agent.py L40-43); instance/notifier/# is measured on its own
#: filter so that agents' status events, which `instance/#` also matches, are not owed to agents.
DEFAULT_FAMILIES: tuple[Family, ...] = (
    # cloud controller: TopologyEventPublisher.java L142-L317, TopologyBuilder.java L556
    _fam(
        "topology",
        "topology/#",
        ["topology/MemberActivatedEvent", "topology/CompleteTopologyEvent"],
        "controller",
        "agents",
    ),
    # stratos manager InstanceNotificationPublisher.java L59; autoscaler L49, L59
    _fam(
        "instance-notifier",
        "instance/notifier/#",
        ["instance/notifier/ArtifactUpdatedEvent"],
        "controller",
        "agents",
    ),
    # stratos manager StratosManagerServiceComponent.java L194-195
    _fam("tenant", "tenant/#", ["tenant/CompleteTenantEvent"], "controller", "agents"),
    # ApplicationSignUpEventPublisher.java L44-46, L58-60
    _fam(
        "application-signup",
        "application/signup/#",
        ["application/signup/CompleteApplicationSignUpsEvent"],
        "controller",
        "agents",
    ),
    # PCA publisher.py (agent.py L83, L92-96); consumed by InstanceStatusTopicReceiver.java L49-108
    _fam(
        "instance-status",
        "instance/status/#",
        ["instance/status/InstanceStartedEvent", "instance/status/InstanceActivatedEvent"],
        "agents",
        "controller",
    ),
    # PCA agent.py L57, L77; consumed by InitializerTopicReceiver.java L40-47
    _fam(
        "initializer", "initializer/#", ["initializer/CompleteTopologyRequestEvent"], "agents", "controller"
    ),
)


@dataclass(frozen=True)
class Flow:
    """One family's traffic from one group's producers to another group's consumers."""

    family: str
    source: str
    target: str


def controller_group(topology: object) -> str:
    t = getattr(topology, "traffic", None)
    groups = topology.groups  # type: ignore[attr-defined]
    return (t.controller if t and t.controller else None) or groups[0].name


def families(topology: object) -> list[Family]:
    t = getattr(topology, "traffic", None)
    return list(t.families) if t and t.families else list(DEFAULT_FAMILIES)


def _ends(e: Ends, controller: str, groups: list[str]) -> list[str]:
    if e == "controller":
        return [controller]
    if e == "agents":
        return list(groups)
    return list(e)


def flows(topology: object) -> list[Flow]:
    """Every (family, producer group, consumer group), in family then group order."""
    groups = [g.name for g in topology.groups]  # type: ignore[attr-defined]
    ctl = controller_group(topology)
    out = []
    for f in families(topology):
        for s in _ends(f.source, ctl, groups):
            for d in _ends(f.target, ctl, groups):
                out.append(Flow(f.name, s, d))
    return out
