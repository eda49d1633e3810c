"""The `subscribe-held` agents (issue 41 item 4): a subscriber whose SUBSCRIBE reaches the broker
only seconds after its CONNECT, at its first connection and at every reconnection.

The subscriber and the publisher are two agents, and the subscriber dials its own proxies (one
per member, `sub-<broker>`, recorded in run.json's links so the verdict maps them to members), so
the hold touches the subscriber's link and never the publisher's. Each of those proxies carries a
`limit_data` toxic upstream with `hold` and `frames` 1 (the builtin fault proxy's attributes): the
connection's first whole MQTT or STOMP frame (its CONNECT, whatever client id the agent picked)
passes, every frame after it waits `hold_ms`. An agent that logs `subscribed` at the SUBACK logs
it after the hold; one that logs it when it sends SUBSCRIBE claims a consumer the broker has not
got (consumer_confirmed).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from harness.agents.launch import AgentSpec, agent_factory, combine
from harness.deploy.plan import free_ports
from harness.run.runner import AgentFactory, RunError
from harness.verdict.witness import SNAPSHOT_S
from harness.witness.events import GAP_END, OBSERVER_FILE, read_events

SUB_AGENT, PUB_AGENT = "sub-1", "pub-1"
#: the frames of each subscriber connection that pass before the hold: its CONNECT (or STOMP's
#: CONNECT/STOMP frame), whatever its length; every frame after it waits
PASSED_FRAMES = 1
#: the protocols whose frames the fault proxy can count (harness/faultproxy/frames.py)
FRAMED = ("mqtt", "stomp")


def past_replay(run_dir: Path, cap_s: float = 10.0) -> None:
    """Wait until the broker witness's start-up replay is over (SNAPSHOT_S after its last
    `observer_gap_end`): a claim inside it is judged unknown, and the first connect's claim is the
    one this entry is for. No observer file: nothing to wait for."""
    ends = [
        float(r["ts"]) for r in read_events(run_dir / "brokers" / OBSERVER_FILE) if r.get("event") == GAP_END
    ]
    if ends:
        time.sleep(min(cap_s, max(0.0, max(ends) + SNAPSHOT_S + 0.25 - time.time())))


def subscribe_held(
    group: str, protocol: str, count: int, rate: float, command: str | None, hold_ms: int
) -> AgentFactory:
    """A subscriber-only agent behind its own held proxies, then a publisher-only agent."""

    def make(env: Any) -> list[AgentSpec]:
        version = env.proxy.version()  # Toxiproxy ignores `hold`: it would close at the limit
        if not isinstance(version, dict) or version.get("server") != "bfh-fault-proxy":
            raise RunError("the subscribe-held entry needs the builtin fault proxy (limit_data hold)")
        if protocol not in FRAMED:
            raise RunError(f"the subscribe-held entry holds MQTT or STOMP frames, not {protocol}")
        members = [b.name for b in env.plan.members(group)]
        ports = free_ports(len(members))
        own: dict[str, str] = {}
        links = []
        for member, port in zip(members, ports, strict=True):
            link = env.plan.client_link(member, protocol)
            name, listen = f"sub-{member}", f"127.0.0.1:{port}"
            env.proxy.create_proxy(name, listen, link.upstream)
            env.proxy.limit(name, 0, stream="upstream", hold_ms=hold_ms, frames=PASSED_FRAMES)
            own[link.url] = listen
            links.append(
                {"name": name, "listen": listen, "upstream": link.upstream, "enabled": True}
                | {"kind": "client", "broker": member, "connector": protocol}
            )
        recorded = [
            {**lk.proxy_spec(), "kind": lk.kind, "broker": lk.broker, "connector": lk.connector}
            for lk in env.plan.links
        ]
        env.record(links=recorded + links)
        # the SUBACK and the PINGRESP come after the hold: the agent's waits must outlast it
        outlast = str(max(10, 3 * hold_ms // 1000))
        conf = {"mb.connect.timeout": outlast, "mb.keepalive": outlast}
        sub = agent_factory(
            name=SUB_AGENT,
            group=group,
            protocol=protocol,
            count=0,
            command=command,
            url_order=lambda urls: [own[u] for u in urls],
            extra_conf=conf,
        )
        pub = agent_factory(
            name=PUB_AGENT,
            group=group,
            protocol=protocol,
            subscriptions=(),
            count=count,
            rate=rate,
            command=command,
        )
        specs = combine(sub, pub)(env)
        past_replay(Path(env.run_dir))
        return specs

    return make
