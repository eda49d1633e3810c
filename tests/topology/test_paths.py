"""The static delivery-path prediction (harness/topology/paths.py) against ActiveMQ's routing rules
(shared notes: activemq-network-routing.md, the hub-and-spoke worked table)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.topology import TopologyError, load_topology, parse_topology
from harness.topology.paths import amq_match, path_warnings, predict
from tests.cli.support import ROOT, bfh


def hub_spoke(**bridge: Any) -> Any:
    data: dict[str, Any] = {
        "name": "hs",
        "groups": [{"name": "hub"}, {"name": "east"}, {"name": "west"}],
        "bridges": [{"from": s, "to": "hub", **bridge} for s in ("east", "west")],
    }
    return data


def routable(data: dict[str, Any]) -> dict[str, bool]:
    return {p.key: p.routable for p in predict(parse_topology(data, "test"))}


def test_duplex_ttl1_spokes_cannot_reach_each_other() -> None:
    r = routable(hub_spoke(duplex=True))
    assert r == {
        "hub->hub": True,
        "hub->east": True,
        "hub->west": True,
        "east->hub": True,
        "east->east": True,
        "east->west": False,
        "west->hub": True,
        "west->east": False,
        "west->west": True,
    }
    warnings = path_warnings(predict(parse_topology(hub_spoke(duplex=True), "t")))
    assert "path east → west needs 2 hops, network_ttl is 1 (bridge east -> hub)" in warnings
    assert len(warnings) == 2


def test_duplex_ttl2_routes_every_path() -> None:
    preds = predict(parse_topology(hub_spoke(duplex=True, network_ttl=2), "t"))
    assert all(p.routable for p in preds)
    assert {p.key: p.hops for p in preds}["east->west"] == 2
    assert path_warnings(preds) == []


def test_non_duplex_bridge_has_no_way_back() -> None:
    r = routable(hub_spoke(network_ttl=2))
    assert r["east->hub"] and r["west->hub"]
    assert not r["hub->east"] and not r["hub->west"] and not r["east->west"]
    ws = path_warnings(predict(parse_topology(hub_spoke(network_ttl=2), "t")))
    assert any(w.startswith("path hub → east: no bridge forwards from hub toward east") for w in ws), ws


def test_consumer_and_message_ttl_split() -> None:
    # east -> west needs consumerTTL >= 2 on east's connector and messageTTL >= 2 on west's (the
    # hub's responder toward west uses west's settings); the notes' worked table
    data = hub_spoke(duplex=True, network_ttl=2)
    data["bridges"][1]["attributes"] = {"consumerTTL": 1}
    r = routable(data)
    assert not r["west->east"], "west's bridge ignores demand that already crossed a bridge"
    assert r["east->west"], "west's messageTTL is still 2"
    data["bridges"][1]["attributes"] = {"messageTTL": 1}
    r = routable(data)
    assert not r["east->west"], "the hub's responder toward west forwards nothing that crossed a bridge"
    assert r["west->east"]
    assert r["west->hub"] and r["hub->west"]


def test_unlimited_ttl_and_destination_filter() -> None:
    data = hub_spoke(duplex=True, attributes={"consumerTTL": -1, "messageTTL": -1})
    assert all(routable(data).values())
    data = hub_spoke(duplex=True, network_ttl=2, attributes={"destinationFilter": "Topic.other.>"})
    r = routable(data)
    assert not r["east->hub"] and r["east->east"]
    ws = path_warnings(predict(parse_topology(data, "t")))
    assert any("destinationFilter" in w for w in ws)


def test_static_bridge_forwards_no_demand() -> None:
    r = routable(hub_spoke(duplex=True, attributes={"staticBridge": True}))
    assert not r["east->hub"] and not r["hub->east"]


def test_unconnected_groups_are_not_required() -> None:
    data = {"name": "two", "groups": [{"name": "a"}, {"name": "b"}]}
    preds = {p.key: p for p in predict(parse_topology(data, "t"))}
    assert preds["a->b"].must == "none" and not preds["a->b"].routable
    assert preds["a->a"].must == "deliver"
    assert path_warnings(list(preds.values())) == []


def test_declared_paths() -> None:
    data = hub_spoke(duplex=True, network_ttl=2)
    data["paths"] = [{"from": "east", "to": "hub"}, {"from": "east", "to": "west", "deliver": False}]
    preds = {p.key: p for p in predict(parse_topology(data, "t"))}
    assert preds["east->hub"].must == "deliver"
    assert preds["east->west"].must == "not"
    assert preds["west->east"].must == "report", "an undeclared connected path is reported, not required"
    assert preds["hub->hub"].must == "deliver", "a group always delivers to itself"
    ws = path_warnings(list(preds.values()))
    assert ws == [
        "path east → west is declared deliver: false, but ActiveMQ routes it "
        "(2 hops via east -> hub then west -> hub (duplex))"
    ]


def test_declared_paths_name_known_groups_once() -> None:
    data = hub_spoke(duplex=True)
    data["paths"] = [
        {"from": "east", "to": "nowhere"},
        {"from": "east", "to": "hub"},
        {"from": "east", "to": "hub"},
    ]
    with pytest.raises(TopologyError) as e:
        parse_topology(data, "t")
    assert "unknown group 'nowhere'" in str(e.value) and "already declared" in str(e.value)


def test_amq_wildcards() -> None:
    assert amq_match("a.>", "a.b.c") and amq_match("a.*.c", "a.b.c") and not amq_match("a.*", "a.b.c")
    assert amq_match("a.b", "a.b") and not amq_match("a.b", "a.b.c")


def test_imported_hub_spoke_example_routes_all_nine_paths() -> None:
    t = load_topology(ROOT / "examples/ops/hub-spoke.yaml")
    preds = predict(t)
    assert len(preds) == 9 and all(p.routable and p.must == "deliver" for p in preds)
    assert {b.duplex for b in t.bridges} == {True} and {b.network_ttl for b in t.bridges} == {2}


def test_topology_validate_prints_the_warning_in_seconds(tmp_path: Path) -> None:
    f = tmp_path / "spokes.yaml"
    f.write_text(
        "name: spokes\ngroups: [{name: hub}, {name: east}, {name: west}]\n"
        "bridges:\n  - {from: east, to: hub, duplex: true}\n  - {from: west, to: hub, duplex: true}\n"
    )
    p = bfh("topology", "validate", str(f), timeout=60)
    assert p.returncode == 0, p.stderr
    assert "path east → west needs 2 hops, network_ttl is 1" in p.stderr
    assert "paths: 7 of 9 that must deliver are routable (predicted)" in p.stderr


def test_topology_validate_of_one_group_names_no_flows_rather_than_zero_of_zero() -> None:
    p = bfh("topology", "validate", str(ROOT / "harness/topologies/pair.yaml"), timeout=60)
    assert p.returncode == 0, p.stderr
    assert "0 of 0" not in p.stderr
    assert "traffic initializer (initializer/#): no flow between groups must deliver" in p.stderr
    assert "paths: 1 of 1 that must deliver are routable (predicted)" in p.stderr
