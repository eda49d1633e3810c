"""Dead and black-holed brokers are noticed within a bounded time, never the OS TCP timeout.

- A black-holed first URL (accepts TCP, drops every byte) costs one connect timeout, then the next
  URL serves; the `no_connect_timeout` defect agent stalls on it (control).
- A partition of the serving link (silence both ways, no close) is noticed by every role within
  the liveness bound (default <= 5 s), and every role is back within seconds of the heal.
"""

from __future__ import annotations

import time

import pytest

from harness.deploy.plan import HOST, free_ports
from harness.run.env import Environment
from tests.agent.support import (
    defect,
    events,
    lost_connections,
    roles,
    start_agent,
    stop_ok,
    subscribed_all,
    unique,
    wait_or_fail,
)

pytestmark = [pytest.mark.broker, pytest.mark.partition, pytest.mark.timeout(240)]

CONNECT_TIMEOUT_S = 2.0
LIVENESS_BOUND_S = 5.0


def _black_hole_first(env: Environment, protocol: str) -> tuple[str, str, list[str]]:
    master = env.backend.master("pair")
    assert master is not None
    (port,) = free_ports(1)
    name = unique(f"bh-{protocol}-")
    env.proxy.create_proxy(name, f"{HOST}:{port}", f"{HOST}:{env.plan.brokers[master].ports[protocol]}")
    env.proxy.black_hole(name)
    return name, f"{HOST}:{port}", [f"{HOST}:{port}", env.plan.client_link(master, protocol).listen]


@pytest.mark.parametrize("protocol", ["mqtt", "stomp"])
def test_black_holed_first_url_costs_one_connect_timeout(healthy_pair: Environment, protocol: str) -> None:
    env = healthy_pair
    name, bh, urls = _black_hole_first(env, protocol)
    root = unique("bh")
    try:
        t0 = time.time()
        ag = start_agent(env, protocol=protocol, urls=urls, subscriptions=[f"{root}/a/#", f"{root}/b/#"])
        wait_or_fail(ag, subscribed_all, 15, "subscribed past the black hole")
        stop_ok(ag)
        for role in roles(ag):
            first = events(ag, "connected", role=role)[0]
            assert first["broker"] == urls[1]
            timeouts = [r for r in events(ag, "disconnected", role=role, broker=bh)]
            assert timeouts and "timeout" in timeouts[0]["reason"], timeouts
            # process start (~1 s) + one connect timeout + slack
            assert first["ts"] - t0 < CONNECT_TIMEOUT_S + 4.0
    finally:
        env.proxy.delete_proxy(name)


def test_control_no_connect_timeout_defect_is_caught(healthy_pair: Environment) -> None:
    env = healthy_pair
    name, _bh, urls = _black_hole_first(env, "mqtt")
    root = unique("bhd")
    try:
        ag = start_agent(env, urls=urls, subscriptions=[f"{root}/#"], command=defect("no_connect_timeout"))
        time.sleep(CONNECT_TIMEOUT_S + 6.0)
        assert not events(ag, "connected"), "the defect agent should still be stuck on the black hole"
        ag.kill()
    finally:
        env.proxy.delete_proxy(name)


@pytest.mark.parametrize("protocol", ["mqtt", "stomp"])
def test_partitioned_link_noticed_within_liveness_bound(healthy_pair: Environment, protocol: str) -> None:
    env = healthy_pair
    master = env.backend.master("pair")
    assert master is not None
    link = env.plan.client_link(master, protocol)
    root = unique("part")
    ag = start_agent(
        env,
        protocol=protocol,
        subscriptions=[f"{root}/a/#", f"{root}/b/#"],
        publications=[(f"{root}/a/x", 10_000, 5.0)],
    )
    wait_or_fail(ag, subscribed_all, 20, "subscribed")
    wait_or_fail(ag, lambda a: len(events(a, "sent")) >= 5, 10, "publishing")
    time.sleep(1.0)
    t_cut = time.time()
    fault = env.faults.start("partition", link.name)
    wait_or_fail(
        ag,
        lambda a: {r["role"] for r in lost_connections(a) if r["ts"] > t_cut} == roles(a),
        LIVENESS_BOUND_S + 3,
        "every role notices the partition",
    )
    for role in roles(ag):
        noticed = min(r["ts"] for r in lost_connections(ag) if r["role"] == role and r["ts"] > t_cut)
        assert noticed - t_cut <= LIVENESS_BOUND_S, f"{role} noticed after {noticed - t_cut:.1f}s"
    time.sleep(2.0)
    t_heal = time.time()
    env.faults.stop(fault)
    wait_or_fail(
        ag,
        lambda a: all(any(r["ts"] > t_heal for r in events(a, "connected", role=role)) for role in roles(a)),
        8,
        "every role reconnects after the heal",
    )
    stop_ok(ag)
