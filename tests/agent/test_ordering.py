"""mb.urls order: every (re)connect goes to the first URL that serves, for every role.

The list is [a closed port, the slave's link, the master's link, a second proxy to the master]:
both of the last two serve, so "first serving URL wins" is observable. Then the master's link goes
down (everyone moves to the second proxy), comes back, and the second proxy goes down (everyone
returns to the master's link).
"""

from __future__ import annotations

import time

import pytest

from harness.contracts.msglog import iter_records
from harness.deploy.plan import HOST, free_ports
from harness.run.env import Environment
from tests.agent.support import events, roles, start_agent, stop_ok, subscribed_all, unique, wait_or_fail

pytestmark = [pytest.mark.broker, pytest.mark.masterslave, pytest.mark.protocols, pytest.mark.timeout(180)]


def _on(ag, url: str, since: float):  # noqa: ANN001, ANN202 - local helper
    def check(a) -> bool:  # noqa: ANN001
        return all(
            any(r["broker"] == url and r["ts"] > since for r in events(a, "connected", role=role))
            for role in roles(a)
        )

    return check


@pytest.mark.parametrize("protocol", ["mqtt", "stomp"])
def test_first_serving_url_wins_on_every_reconnect(healthy_pair: Environment, protocol: str) -> None:
    env = healthy_pair
    master = env.backend.master("pair")
    assert master is not None
    slave = next(b for b in env.plan.brokers if b != master)
    master_link = env.plan.client_link(master, protocol)
    slave_link = env.plan.client_link(slave, protocol)
    closed_port, extra_port = free_ports(2)
    extra_name = unique(f"extra-{protocol}-")
    env.proxy.create_proxy(
        extra_name, f"{HOST}:{extra_port}", f"{HOST}:{env.plan.brokers[master].ports[protocol]}"
    )
    extra = f"{HOST}:{extra_port}"
    urls = [f"{HOST}:{closed_port}", slave_link.listen, master_link.listen, extra]
    root = unique("ord")
    ag = start_agent(
        env,
        protocol=protocol,
        urls=urls,
        subscriptions=[f"{root}/a/#", f"{root}/b/#"],
        publications=[(f"{root}/a/x", 400, 20.0)],
    )
    try:
        wait_or_fail(ag, subscribed_all, 20, "subscriptions confirmed")
        wait_or_fail(ag, _on(ag, master_link.listen, 0), 10, "every role on the master's link")
        for role in roles(ag):
            first = events(ag, "connected", role=role)[0]
            assert first["broker"] == master_link.listen, f"{role} first connected to {first['broker']}"
            tried = [r["broker"] for r in events(ag, "disconnected", role=role) if r["ts"] <= first["ts"]]
            assert tried[:2] == urls[:2], f"{role} did not try the list in order before connecting: {tried}"

        t1 = time.time()
        fault = env.faults.start("down", master_link.name)
        wait_or_fail(ag, _on(ag, extra, t1), 15, "every role moved to the next serving URL")
        env.faults.stop(fault)
        time.sleep(1.0)
        # no role moves back by itself: a working connection is kept
        assert not [r for r in events(ag, "connected") if r["ts"] > t1 and r["broker"] == master_link.listen]

        t2 = time.time()
        env.proxy.disable(extra_name)
        wait_or_fail(ag, _on(ag, master_link.listen, t2), 15, "every role back on the first serving URL")
        later = [r for r in events(ag, "connected") if r["ts"] > t2]
        assert {r["broker"] for r in later} == {master_link.listen}, later
    finally:
        # kill -9 this one: its log must stay readable (at most the last record torn)
        ag.kill()
        env.proxy.delete_proxy(extra_name)
    torn: list[str] = []
    recs = list(iter_records(ag.log_path, torn))
    assert len(torn) <= 1 and recs


def test_sigterm_exits_cleanly_with_final_records(healthy_pair: Environment) -> None:
    root = unique("term")
    ag = start_agent(healthy_pair, subscriptions=[f"{root}/#"], publications=[(f"{root}/x", 1000, 50.0)])
    wait_or_fail(ag, subscribed_all, 20, "subscribed")
    wait_or_fail(ag, lambda a: len(events(a, "sent")) > 10, 10, "publishing")
    stop_ok(ag)
    final = [r for r in events(ag, "disconnected") if r["reason"] == "shutdown"]
    assert {r["role"] for r in final} == roles(ag)
