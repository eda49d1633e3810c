"""The catalog's entries, as data: what each scenario needs of a topology, its fault steps (targets
written with `{group}`, `{src}`, `{dst}`), its agents' workload, the promises it gates (every
promise but `exclude`) and the bounds/expectations its checkers read (`params`). harness/catalog/scenarios.py
builds and runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.faults.schedule import Step
from harness.topology import Topology, builtin_topology
from harness.verdict import DEFAULT_GATES


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str
    needs: str = "pair"  # pair | bridge | users
    steps: tuple[Step, ...] = ()
    count: int = 80
    rate: float = 10.0
    timeout_s: int = 900
    settle_s: float = 8.0
    agents: str = "single"  # single | network | hostile-first | subscribe-held | wrong-password | credentials
    exclude: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ("masterslave",)
    topology: str = "pair"  # the built-in topology the conformance suite runs it on
    protocol: str | None = None  # None: the topology's (MQTT where it has it)
    qos: int = 1
    durable: bool = True
    seed: int = 1
    fleet: int = 0  # agents per group of a fleet entry (harness/agents/fleet.py); 0: not a fleet
    #: the fields (and params) a user set (`with_changes`): a fleet's scaling leaves them as set
    pinned: frozenset[str] = frozenset()

    @property
    def gates(self) -> list[str]:
        return [p for p in DEFAULT_GATES if p not in self.exclude]


def _s(at: float, fault: str, target: str, duration: float | None = None, **params: Any) -> Step:
    return Step(at=at, fault=fault, target=target, duration=duration, params=params)


def _network(name: str, what: str, **fields: Any) -> Scenario:
    """A network-of-pairs entry: publisher on a bridge's source pair, durable subscriber on its target."""
    base: dict[str, Any] = {
        "needs": "bridge",
        "agents": "network",
        "settle_s": 15.0,
        "tags": ("network",),
        "topology": "network-of-pairs",
        "seed": 3,
    }
    return Scenario(name, what, **{**base, **fields})


#: a fleet's bounds: N agents on two shared cores start, and get their first acks, slower than
#: one agent does (50 agents at a load average of 30: acks up to 5.9 s after the first attempt)
FLEET_PARAMS: dict[str, Any] = {"subscribe_wait_s": 180, "connect_bound_s": 60.0, "publish_latency_s": 15.0}


def _fleet(name: str, what: str, **fields: Any) -> Scenario:
    """A fleet entry: `fleet` agents per pair (harness/agents/fleet.py); not in `make test` (extended)."""
    # pair-fleet: NIO connectors (a shared thread pool, not a thread per connection) and each
    # durable subscription a virtual topic's queue (O(1) acks at any fleet size): docs/fleet.md
    base: dict[str, Any] = {
        "agents": "fleet",
        "fleet": 20,
        "settle_s": 10.0,
        "tags": ("fleet", "extended"),
        "topology": "pair-fleet",
    }
    merged = {**base, **fields}
    merged["params"] = {**FLEET_PARAMS, **fields.get("params", {})}
    return Scenario(name, what, **merged)


_NO_SERVICE = ("connect_timeout", "recovery", "first_available", "at_least_once", "publish_latency")
_DEGRADED = ("liveness", "publish_latency")  # latency and bandwidth toxics are the fault itself

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "baseline", "no fault: traffic through the first master/slave group", count=60, tags=("baseline",)
        ),
        Scenario(
            "masterslave",
            "kill -9 the master mid-traffic: no loss, the agent follows the slave",
            steps=(_s(5, "kill", "master:{group}"),),
        ),
        Scenario("stop-master", "graceful stop of the master", steps=(_s(5, "stop", "master:{group}"),)),
        Scenario(
            "flapping",
            "kill the master, let it return as slave, kill the new master: both takeovers followed",
            steps=(_s(3, "kill", "master:{group}", 5), _s(13, "kill", "master:{group}", 5)),
            count=200,
            params={"expect_takeovers": 2},
        ),
        Scenario(
            "pause-master",
            "SIGSTOP the master 20 s: it keeps the lock; the agent notices, keeps retrying, drops nothing",
            steps=(_s(4, "pause", "master:{group}", 20),),
            count=150,
        ),
        Scenario(
            "both-down-short",
            "both members down 8 s, shorter than mb.publisher.timeout (40 s): no drop, no loss",
            steps=(_s(4, "kill", "members:{group}", 8),),
            timeout_s=40,
        ),
        Scenario(
            "both-down-long",
            "both members down 14 s, longer than mb.publisher.timeout (4 s): exactly the messages "
            "whose outage outlasted the timeout are dropped, at first attempt + timeout",
            steps=(_s(4, "kill", "members:{group}", 14),),
            timeout_s=4,
            count=320,
            params={"expect_drops": True},
        ),
        Scenario(
            "blackhole-master",
            "the master's client links black-holed 12 s: every connection given up within the "
            "liveness bound, no loss after the heal",
            steps=(_s(4, "partition", "master:{group}", 12),),
        ),
        Scenario(
            "degraded",
            "latency with jitter, a bandwidth cap, sliced packets and TCP resets on the master's links",
            steps=(
                _s(2, "latency", "master:{group}", 5, latency_ms=300, jitter_ms=100),
                _s(8, "bandwidth", "master:{group}", 4, rate_kbps=8),
                _s(13, "slicer", "master:{group}", 4, average_size=16, size_variation=8, delay_us=200),
                _s(18, "reset_peer", "master:{group}", 2, timeout_ms=200),
            ),
            count=220,
            exclude=_DEGRADED,
        ),
        Scenario(
            "ordering",
            "a black-holed and a dead address first, the slave before the master in mb.urls: the "
            "agent uses the master, then the slave after the master is killed",
            steps=(_s(6, "kill", "master:{group}"),),
            agents="hostile-first",
        ),
        Scenario(
            "subscribe-held",
            "the subscriber's CONNECT passes and its SUBSCRIBE waits 5 s on its own link, at the "
            "first connect and at the slave after a kill -9 of the master: `subscribed` comes at "
            "the SUBACK, after the hold",
            steps=(_s(5, "kill", "master:{group}"),),
            agents="subscribe-held",
            protocol="mqtt",
            count=200,  # traffic outlasts the hold at the slave: the run's end resets the proxy
            params={"hold_ms": 5000},
        ),
        Scenario(
            "one-connection-cut",
            "sever the agent's connections to the master one at a time: each cut disturbs one role",
            steps=(_s(4, "sever", "master:{group}", gap_s=3),),
            count=200,
            params={"expect_cuts": 1},
        ),
        Scenario(
            "wrong-password",
            "a wrong mb.password: the agent keeps retrying at a bounded rate, never subscribes, and "
            "exits cleanly on SIGTERM",
            needs="users",
            agents="wrong-password",
            count=20,
            timeout_s=5,
            settle_s=3.0,
            exclude=_NO_SERVICE,
            params={"expect_acks": False, "expect_rejections": True, "subscribe_wait_s": 0},
            tags=("security",),
            topology="auth-pair",
        ),
        Scenario(
            "credentials-kill",
            "with credentials, kill -9 the master: no loss, no password in any output",
            needs="users",
            agents="credentials",
            steps=(_s(5, "kill", "master:{group}"),),
            tags=("security",),
            topology="auth-pair",
        ),
        Scenario(
            "tls-credentials-kill",
            "over TLS (the run's CA) with credentials, kill -9 the master: no loss, no leaked password",
            needs="users",
            agents="credentials",
            steps=(_s(5, "kill", "master:{group}"),),
            tags=("security",),
            topology="secure-pair",
        ),
        Scenario(
            "stomp-kill",
            "over STOMP (persistent sends, durable subscriptions), kill -9 the master",
            steps=(_s(5, "kill", "master:{group}"),),
            protocol="stomp",
            tags=("protocols",),
            seed=2,
        ),
        Scenario(
            "stomp-stop",
            "over STOMP, graceful stop of the master",
            steps=(_s(5, "stop", "master:{group}"),),
            protocol="stomp",
            tags=("protocols",),
            seed=2,
        ),
        _fleet(
            "fleet-masterslave",
            "a fleet on one pair, kill -9 the master: every agent back within the bound, none left "
            "behind or starved, the reconnect storm at the slave within the entry's bounds",
            steps=(_s(5, "kill", "master:{group}"),),
            count=200,
        ),
        _fleet(
            "fleet-pause-master",
            "a fleet on one pair, SIGSTOP the master 20 s: every agent notices, retries within the "
            "storm bound and comes back after the thaw",
            steps=(_s(4, "pause", "master:{group}", 20),),
            count=300,
        ),
        _fleet(
            "fleet-network",
            "a fleet on each pair of a network, kill -9 the first pair's master: that pair's fleet "
            "fails over, the other pair's fleet is undisturbed",
            steps=(_s(5, "kill", "master:{group}"),),
            topology="network-fleet",
            count=200,
            fleet=10,
            seed=3,
        ),
        _network(
            "network-baseline",
            "publisher on a bridge's source pair, durable subscriber on its target pair, no fault",
            count=100,
        ),
        _network(
            "network",
            "publisher on a bridge's source, durable subscriber on its target; kill the target's master",
            steps=(_s(5, "kill", "master:{dst}"),),
            count=150,
        ),
        _network(
            "network-kill-source",
            "kill -9 the publisher's pair master: the publisher and the bridge fail over",
            steps=(_s(5, "kill", "master:{src}"),),
            count=150,
        ),
        _network(
            "bridge-partition",
            "black-hole every bridge 20 s: messages wait on the source pair and arrive after the heal",
            steps=(_s(4, "partition", "bridges", 20),),
            count=250,
            tags=("network", "partition"),
        ),
        _network(
            "bridge-down",
            "cut every bridge 10 s (connections closed, reconnects refused): the bridges come back",
            steps=(_s(4, "down", "bridges", 10),),
            count=150,
            tags=("network", "partition"),
        ),
    )
}

# Built-in topologies that are variants of another (seed 002's static:(master,slave) bridges).
VARIANTS: dict[str, Callable[[], Topology]] = {}


def static_list_network() -> Topology:
    """network-of-pairs with seed 002's anti-pattern: static:(master,slave) bridges."""
    from harness.topology import parse_topology

    data = builtin_topology("network-of-pairs").model_dump(mode="json", by_alias=True, exclude_none=True)
    data["name"] = "seed002-static-list-mqtt"
    for b in data["bridges"]:
        b["uri"] = "static-list"
    return parse_topology(data, "seed002 variant of network-of-pairs")


VARIANTS["seed002-static-list-mqtt"] = static_list_network


def topology_named(name: str) -> Topology:
    return VARIANTS[name]() if name in VARIANTS else builtin_topology(name)
