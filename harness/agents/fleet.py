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
#: connection attempts a second the reference agent's fleet aims its retries at, over all roles:
#: a slave that just took over answered 250-350 CONNECTs a second here (issue 44, docs/fleet.md);
#: 2,000 roles retrying under a 1 s cap asked for 700 a second with a 2 s timeout, every CONNECT
#: was answered after its client had given up, and none came back
FLEET_ATTEMPTS_PER_S = 250.0
#: MQTT PINGREQs a second the fleet's keepalives add up to: at 1,000 members the agent's 2 s
#: keepalive was 1,000 pings a second, and a master busy with 1,000 durable subscribers' acks
#: answered some late enough that paho dropped the link (the controller's too: every resend of
#: its in-flight events was a duplicate at every member)
FLEET_PINGS_PER_S = 200.0
#: controller deliveries a second (rate x members) a fleet entry's default workload aims at: half
#: of what one pair-fleet pair on two cores carried to 1,000 members (805-1,006 a second on two
#: machines, docs/fleet.md): at 1,000 asked, its acks fell behind on the slower one and 2 runs of
#: 3 failed publish_latency. An entry's own 10 events a second to 1,000 members never finished
FLEET_DELIVERIES_PER_S = 500.0
#: the fewest controller events a scaled-down default keeps (issue 44's thousand: 100 events)
FLEET_MIN_EVENTS = 100
#: status events in all (members x status_count) a default workload aims at, one each at least
FLEET_STATUS_EVENTS = 1000


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

    def reference_conf(self, roles_per_agent: int) -> dict[str, str]:
        """The reference agent's retry cap and keepalive for this fleet: never under its own
        defaults (1 s, 2 s), and at scale paced so that the fleet's retries and pings together stay
        near FLEET_ATTEMPTS_PER_S and FLEET_PINGS_PER_S (a jittered delay averages 3/4 of the cap).
        Stratos' own agent waits 2-60 s between retries and keeps alive at 60 s."""
        roles = self.size * roles_per_agent
        cap = round(max(1.0, roles / (0.75 * FLEET_ATTEMPTS_PER_S)), 1)
        keepalive = max(2, round(roles / FLEET_PINGS_PER_S))
        return {"mb.backoff.cap": f"{cap:g}", "mb.keepalive": str(keepalive)}


def fleet_workload(
    members: int, count: int, rate: float, status: int, pinned: frozenset[str] = frozenset()
) -> tuple[int, float, int]:
    """An entry's (controller events, their rate, status events per member) at `members` agents
    per group: the rate cut so the fan-out stays near FLEET_DELIVERIES_PER_S, the events cut in
    proportion (never under FLEET_MIN_EVENTS), status events cut so the fan-in stays near
    FLEET_STATUS_EVENTS. What the user set (`pinned`: count, rate, status_count) stays."""
    new_rate = rate if "rate" in pinned else min(rate, FLEET_DELIVERIES_PER_S / members)
    if "count" not in pinned and new_rate < rate:
        count = max(min(count, FLEET_MIN_EVENTS), round(count * new_rate / rate))
    if "status_count" not in pinned:
        status = max(1, min(status, FLEET_STATUS_EVENTS // members))
    return count, new_rate, status


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
            # an agent team's own agent keeps its own pacing: that is what is under test
            roles = 2 + shape.instance_topics  # topology (+ instance) subscribers and a publisher
            conf = None if command else shape.reference_conf(roles)
            ctl = None if conf is None else {"mb.keepalive": conf["mb.keepalive"]}  # retries: 1 s
            sub = agent_factory(
                name=f"ctl-sub-{g}", subscriptions=(f"instance/status/{g}/#",), count=0, extra_conf=ctl, **kw
            )(env)
            specs += sub
            for i in range(1, shape.size + 1):
                m = f"{i:03d}"
                filters = [f"topology/{g}/#"]
                if shape.instance_topics:
                    filters.append(f"instance/notifier/{g}/{m}/#")
                (agent,) = agent_factory(
                    name=member_name(g, i),
                    extra_conf=conf,
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
                extra_conf=ctl,
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
