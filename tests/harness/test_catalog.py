"""The scenario catalog as data (harness/catalog/scenarios.py), built against topologies and a fake
environment: no broker, seconds. What runs is tested in scenarios/."""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.agents.fleet import FLEET_DELIVERIES_PER_S
from harness.catalog import scenarios as catalog
from harness.deploy.plan import make_plan
from harness.verdict import DEFAULT_GATES
from tests.harness.fakes import FakeBackend


class _Proxy:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def create_proxy(self, *args: Any) -> None:
        self.calls.append(("create_proxy", args))

    def black_hole(self, *args: Any) -> None:
        self.calls.append(("black_hole", args))

    def limit(self, *args: Any, **kw: Any) -> None:
        self.calls.append(("limit", args))

    def version(self) -> dict[str, str]:
        return {"version": "2.12.0", "server": "bfh-fault-proxy"}


def _env(tmp_path: Path, topology: Any) -> Any:
    plan = make_plan(topology, tmp_path, port_pool=itertools.count(43000))
    return SimpleNamespace(
        plan=plan,
        backend=FakeBackend(plan),
        proxy=_Proxy(),
        mb_urls=plan.client_urls,
        run_id="20261127-000000-t-ab12",
        run_dir=tmp_path,
        record=lambda **fields: None,
    )


@pytest.mark.parametrize("name", list(catalog.SCENARIOS))
def test_every_entry_builds_on_its_topology(name: str, tmp_path: Path) -> None:
    sc = catalog.SCENARIOS[name]
    topology = catalog.topology_named(sc.topology)
    run = catalog.build(sc, topology)
    assert all("{" not in s.target for s in run.schedule.steps), "every target resolved"
    assert run.record()["gates"] == [p for p in DEFAULT_GATES if p not in sc.exclude]
    assert run.schedule.settle_s == sc.settle_s and len(run.schedule.steps) == len(sc.steps)
    specs = run.agents(_env(tmp_path, topology))
    assert specs and all(s.conf["mb.urls"] for s in specs)
    if sc.agents == "fleet":  # the entry's count is each controller's; the agents add their status
        specs = [s for s in specs if s.name.startswith("ctl-pub-")]
        assert len({s.name for s in run.agents(_env(tmp_path, topology))}) > sc.fleet
    published = sum(p["count"] for s in specs for p in s.workload.get("publications", []))
    assert published == sc.count * (len(specs) if sc.agents == "fleet" else 1)


def test_entries_name_what_they_need(tmp_path: Path) -> None:
    pair = catalog.topology_named("pair")
    with pytest.raises(catalog.CatalogError, match="needs a network bridge"):
        catalog.build("network", pair)
    with pytest.raises(catalog.CatalogError, match="needs users"):
        catalog.build("wrong-password", pair)
    with pytest.raises(catalog.CatalogError, match="unknown scenario 'nosuch'"):
        catalog.build("nosuch", pair)
    assert catalog.default_scenarios(pair) == ["masterslave"]
    assert catalog.default_scenarios(catalog.topology_named("network-of-pairs")) == ["masterslave", "network"]


def test_agents_of_the_special_entries(tmp_path: Path) -> None:
    auth = catalog.topology_named("auth-pair")
    [wrong] = catalog.build("wrong-password", auth).agents(_env(tmp_path / "a", auth))
    assert wrong.conf["mb.password"] == "not-the-password" and wrong.conf["mb.subscribe.wait"] == "2"
    pair = catalog.topology_named("pair")
    env = _env(tmp_path / "b", pair)
    [hostile] = catalog.build("ordering", pair).agents(env)
    urls = hostile.conf["mb.urls"].split(",")
    master, slave = env.plan.client_urls("mqtt", "pair")  # the fake's first member is the master
    assert urls[2:] == [slave, master], "the slave is listed before the master"
    assert [c for c, _ in env.proxy.calls] == ["create_proxy", "black_hole"]
    network = catalog.topology_named("network-of-pairs")
    sub, pub = catalog.build("network", network).agents(_env(tmp_path / "c", network))
    assert sub.workload["subscriptions"] and not sub.workload["publications"]
    assert pub.workload["publications"] and not pub.workload["subscriptions"]
    [qos0] = catalog.build(catalog.with_changes("masterslave", qos=0, durable=False), pair).agents(
        _env(tmp_path / "d", pair)
    )
    assert {s["qos"] for s in qos0.workload["subscriptions"]} == {0}


def test_a_fleet_default_workload_scales_with_its_size() -> None:
    """Issue 44: `--fleet 1000` with the entry's defaults is 100 events at 0.5/s and one status
    event a member (10 events a second to 1,000 members never finished); a small fleet keeps the
    entry's workload, and what the user set stays as set."""
    entry = catalog.SCENARIOS["fleet-masterslave"]
    small = catalog.fleet_shape(catalog.as_fleet(entry, 20))
    assert (small.controller_count, small.controller_rate) == (entry.count, entry.rate)
    assert small.status_count == 30
    big = catalog.fleet_shape(catalog.as_fleet(entry, 1000))
    assert (big.controller_count, big.controller_rate, big.status_count) == (100, 0.5, 1)
    assert big.controller_rate * 1000 <= FLEET_DELIVERIES_PER_S
    mid = catalog.fleet_shape(catalog.as_fleet(entry, 200))
    assert (mid.controller_count, mid.controller_rate, mid.status_count) == (100, 2.5, 5)
    pinned = catalog.with_changes("fleet-masterslave", rate=5.0, params={**entry.params, "status_count": 7})
    kept = catalog.fleet_shape(catalog.as_fleet(pinned, 1000))
    assert (kept.controller_rate, kept.status_count) == (5.0, 7)
    assert kept.controller_count == entry.count  # the rate is the user's: the events are not cut
