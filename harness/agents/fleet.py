"""The fleet workload (docs/contracts.md, "Fleet"): Stratos' shape, one cartridge agent per instance.

Per group: a controller subscriber (`ctl-sub-<group>`, the fan-in of every agent's status
events), N agents (`fleet-<group>-<i>`: each subscribes to the controller's topology events and
publishes its own status events) and a controller publisher (`ctl-pub-<group>`, the fan-out to
every agent). Optionally each agent also has its own instance topic, fed by the controller.
The controller subscriber starts first (stage 0), then the agents in waves of LAUNCH_WAVE (stage
1, 2, ...: each wave's subscriptions confirmed before the next starts); the controller publisher
once every subscription is confirmed (harness.run.runner).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.agents.launch import AgentSpec, agent_factory
from harness.agents.packed import pack_size

MEMBER_PREFIX = "fleet-"
#: members started at once: 1,000 at once (2,000 connections) met a queue of pending connects at
#: the proxy and the broker that timed out, and their retries kept it full (issue 44); the storm
#: under test is the failover's, not the start's
LAUNCH_WAVE = 100
TOPOLOGY_TOPIC = "topology/{group}/TopologyEvent"
STATUS_TOPIC = "instance/status/{group}/{member}/InstanceStatusEvent"
INSTANCE_TOPIC = "instance/notifier/{group}/{member}/InstanceNotifierEvent"


def member_name(group: str, i: int) -> str:
    return f"{MEMBER_PREFIX}{group}-{i:03d}"


def is_member(agent: str) -> bool:
    """A fleet agent (not a controller): the fleet promises judge these."""
    return agent.startswith(MEMBER_PREFIX)


@dataclass(frozen=True)
class FleetShape:
    size: int  # agents per group
    controller_count: int = 150  # topology events, fanned out to every agent
    controller_rate: float = 10.0
    status_count: int = 30  # status events per agent, fanned in to the controller
    status_rate: float = 2.0
    instance_topics: bool = False  # one notifier topic per agent, a few events each
    instance_count: int = 5


def fleet_factory(
    groups: list[str],
    shape: FleetShape,
    *,
    protocol: str = "mqtt",
    command: str | None = None,
    timeout_s: int = 900,
    qos: int = 1,
    durable: bool = True,
) -> Callable[[Any], list[AgentSpec]]:
    """Every group's controller pair and its N agents, as one agent factory."""
    if shape.size < 1:
        raise ValueError(f"a fleet needs at least one agent, not {shape.size}")

    def make(env: Any) -> list[AgentSpec]:
        specs: list[AgentSpec] = []
        pack = pack_size(shape.size)  # the harness's own agent runs packed (harness.agents.packed)
        for g in groups:
            kw: dict[str, Any] = {
                "group": g,
                "protocol": protocol,
                "command": command,
                "timeout_s": timeout_s,
                "qos": qos,
                "durable": durable,
            }
            sub = agent_factory(
                name=f"ctl-sub-{g}", subscriptions=(f"instance/status/{g}/#",), count=0, **kw
            )(env)
            specs += sub
            for i in range(1, shape.size + 1):
                m = f"{i:03d}"
                filters = [f"topology/{g}/#"]
                if shape.instance_topics:
                    filters.append(f"instance/notifier/{g}/{m}/#")
                (agent,) = agent_factory(
                    name=member_name(g, i),
                    subscriptions=tuple(filters),
                    topic=STATUS_TOPIC.format(group=g, member=m),
                    count=shape.status_count,
                    rate=shape.status_rate,
                    **kw,
                )(env)
                agent.stage = 1 + (i - 1) // LAUNCH_WAVE
                agent.pack = pack
                specs.append(agent)
            (pub,) = agent_factory(
                name=f"ctl-pub-{g}",
                subscriptions=(),
                topic=TOPOLOGY_TOPIC.format(group=g),
                count=shape.controller_count,
                rate=shape.controller_rate,
                **kw,
            )(env)
            if shape.instance_topics:
                base = pub.workload["publications"][0]
                pub.workload["publications"] += [
                    {
                        **base,
                        "topic": INSTANCE_TOPIC.format(group=g, member=f"{i:03d}"),
                        "count": shape.instance_count,
                        "rate_per_s": 0.5,
                    }
                    for i in range(1, shape.size + 1)
                ]
            specs.append(pub)
        return specs

    return make
