"""The reference agent, and the stomp.py host-list agent (agent_under_test/stomp_hostlist), exit
within 2 s of SIGTERM in every state they can be in (issue 42).

States: connecting (its first URL a black hole and a 30 s connect timeout, so every role sits in
a handshake), connected (subscribed and publishing), backing off (no broker listening, a 5 s
backoff), publishing into a paused (SIGSTOPped) master with a keepalive long enough that the link
is still held. The measured times are in docs/flakes.md; BFH_SHUTDOWN_SAMPLES=5 takes five per
state (the bound holds for each); BFH_SHUTDOWN_AGENT_CMD measures another agent command;
BFH_SHUTDOWN_RECORD=FILE appends each measurement to FILE (JSON Lines).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import pytest

from harness.agents.launch import AgentProcess
from harness.deploy.plan import HOST, free_ports
from harness.run.env import Environment
from tests.agent.support import HOSTLIST, REFERENCE, events, start_agent, subscribed_all, unique, wait_or_fail

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]

BOUND_S = 2.0
SAMPLES = int(os.environ.get("BFH_SHUTDOWN_SAMPLES", "1"))
COMMAND = os.environ.get("BFH_SHUTDOWN_AGENT_CMD", REFERENCE)  # to measure another agent build
#: (protocol, agent command) under test: the reference over both protocols, and the host-list
#: agent (stomp.py's own failover, whose blocking waits are not the reference's)
AGENTS = {"mqtt": ("mqtt", COMMAND), "stomp": ("stomp", COMMAND), "stomp-hostlist": ("stomp", HOSTLIST)}
RECORD = os.environ.get("BFH_SHUTDOWN_RECORD")  # a JSON Lines file: one line per measurement
ROLES = 3  # two subscribers and the publisher


def _start(env: Environment, agent: tuple[str, str], prefix: str, **kw: Any) -> AgentProcess:
    """Two subscriptions and a 20/s publication (and `kw` for start_agent)."""
    root = unique(prefix)
    subs, pubs = [f"{root}/a/#", f"{root}/b/#"], [(f"{root}/a/x", 100000, 20.0)]
    protocol, command = agent
    return start_agent(env, command=command, protocol=protocol, subscriptions=subs, publications=pubs, **kw)


def _accepted(env: Environment, proxy: str) -> int | None:
    counts = env.proxy.connection_counts()
    if counts is None:
        return None
    return sum(n for _bucket, n in counts.get("proxies", {}).get(proxy, []))


def _connecting(env: Environment, agent: tuple[str, str]) -> tuple[AgentProcess, Callable[[], None]]:
    master = env.backend.master("pair")
    assert master is not None
    protocol = agent[0]
    (port,) = free_ports(1)
    name = unique(f"sd-bh-{protocol}-")
    env.proxy.create_proxy(name, f"{HOST}:{port}", f"{HOST}:{env.plan.brokers[master].ports[protocol]}")
    env.proxy.black_hole(name)
    urls = [f"{HOST}:{port}", env.plan.client_link(master, protocol).listen]
    # paho gives up a CONNACK after `keepalive` s: both bounds long, so every role stays inside
    # (and the publisher starts at once, not after the subscriptions' confirmation)
    conf = {"mb.connect.timeout": "30", "mb.keepalive": "30", "mb.subscribe.wait": "0"}
    ag = _start(env, agent, "sdc", urls=urls, conf=conf)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        n = _accepted(env, name)
        if n is None:  # a real Toxiproxy keeps no counts: allow for start-up instead
            time.sleep(4.0)
            break
        if n >= ROLES:
            time.sleep(0.5)
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the roles never reached the black hole ({_accepted(env, name)} accepted)")
    assert not events(ag, "connected"), "a role got past the black hole: not the connecting state"
    return ag, lambda: env.proxy.delete_proxy(name)


def _connected(env: Environment, agent: tuple[str, str]) -> tuple[AgentProcess, Callable[[], None]]:
    ag = _start(env, agent, "sdn")
    wait_or_fail(ag, subscribed_all, 20, "subscribed")
    wait_or_fail(ag, lambda a: len(events(a, "sent")) >= 5, 15, "publishing")
    return ag, lambda: None


def _backing_off(env: Environment, agent: tuple[str, str]) -> tuple[AgentProcess, Callable[[], None]]:
    urls = [f"{HOST}:{p}" for p in free_ports(2)]  # nothing listens there
    conf = {"mb.backoff.initial": "5", "mb.backoff.cap": "5", "mb.subscribe.wait": "0"}
    ag = _start(env, agent, "sdb", urls=urls, conf=conf)

    def all_failed(a: AgentProcess) -> bool:
        failed = {r["role"] for r in events(a, "disconnected") if r["reason"].startswith("connect_failed")}
        return len(failed) >= ROLES

    wait_or_fail(ag, all_failed, 20, "every role refused once")
    time.sleep(0.3)
    return ag, lambda: None


def _paused(env: Environment, agent: tuple[str, str]) -> tuple[AgentProcess, Callable[[], None]]:
    master = env.backend.master("pair")
    assert master is not None
    # keepalive 30 s: the paused broker's links are still held when SIGTERM comes; 64 KB messages
    # and a wide window fill the socket buffers, so the publisher is inside a send.
    conf = {"mb.keepalive": "30", "mb.publisher.inflight": "2000"}
    root = unique("sdp")
    protocol, command = agent
    ag = start_agent(
        env,
        command=command,
        protocol=protocol,
        conf=conf,
        subscriptions=[f"{root}/a/#", f"{root}/b/#"],
        publications=[(f"{root}/a/x", 100000, 200.0)],
        payload_bytes=65536,
    )
    wait_or_fail(ag, subscribed_all, 20, "subscribed")
    wait_or_fail(ag, lambda a: len(events(a, "sent")) >= 10, 15, "publishing")
    fault = env.faults.start("pause", master)
    time.sleep(2.0)
    return ag, lambda: env.faults.stop(fault)


STATES = {"connecting": _connecting, "connected": _connected, "backing_off": _backing_off, "paused": _paused}


def _stop_time(ag: AgentProcess) -> float:
    t0 = time.monotonic()
    rc = ag.stop(timeout=15)
    took = time.monotonic() - t0
    assert rc == 0, f"agent exit status {rc} after SIGTERM ({took:.1f}s); output: {ag.stderr_tail()}"
    return took


@pytest.mark.parametrize("agent", list(AGENTS))
@pytest.mark.parametrize("state", list(STATES))
def test_sigterm_exits_within_bound_in_every_state(healthy_pair: Environment, agent: str, state: str) -> None:
    protocol, command = AGENTS[agent]
    times = []
    for _ in range(SAMPLES):
        ag, undo = STATES[state](healthy_pair, AGENTS[agent])
        try:
            times.append(_stop_time(ag))
        finally:
            if ag.alive():
                ag.kill()
            undo()
    if RECORD:
        with open(RECORD, "a", encoding="utf-8") as f:
            for t in times:
                row = {"protocol": protocol, "state": state, "s": round(t, 3), "cmd": command}
                f.write(json.dumps(row) + "\n")
    shown = [round(t, 2) for t in times]
    print(f"shutdown {agent} {state}: median {statistics.median(times):.2f} s of {shown}")
    assert max(times) < BOUND_S, (
        f"{agent} agent {state}: exit took {shown} s after SIGTERM (bound {BOUND_S} s)"
    )
