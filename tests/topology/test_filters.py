"""Destination lists and filters, predicted per traffic family (docs/coverage.md, "Destination
filters"): the four ops-written fixtures in tests/fixtures/filters, the reference examples, the
matching rules, and the routing at scale."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.deploy.brokerconf import render_broker
from harness.deploy.plan import make_plan
from harness.topology import load_topology, parse_topology
from harness.topology.destfilter import filter_matches, to_amq
from harness.topology.paths import grouped_warnings, predict, predict_traffic
from tests.cli.support import ROOT, bfh
from tests.topology.generate import chain

FIXTURES = ROOT / "tests" / "fixtures" / "filters"
#: fixture -> (warning text, east.xml line) per blocked flow
BLOCKED = {
    "excluded": [
        ("topology/# from hub to east: excluded by east-to-hub (duplex)'s excludedDestinations", 36)
    ],
    "dynamically-included": [("application/signup/# from hub to east: not in east-to-hub (duplex)'s", 36)],
    "statically-included": [("tenant/# from hub to east: staticBridge: not in east-to-hub (duplex)'s", 37)],
    "destination-filter": [
        ("topology/# from hub to east: refused by east-to-hub (duplex)'s destinationFilter", 30),
        ("tenant/# from hub to east: refused by", 30),
        ("application/signup/# from hub to east: refused by", 30),
        ("initializer/# from east to hub: refused by east-to-hub's destinationFilter `Topic.instance.>`", 30),
    ],
}


@pytest.mark.parametrize("kind", sorted(BLOCKED))
def test_fixture_is_predicted_blocked_with_file_and_line(kind: str) -> None:
    start = time.monotonic()
    p = bfh("topology", "validate", str(FIXTURES / kind / "topology.yaml"), timeout=60)
    took = time.monotonic() - start
    assert p.returncode == 0, p.stderr
    warns = [ln for ln in p.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warns) == len(BLOCKED[kind]), p.stderr
    for text, line in BLOCKED[kind]:
        hit = [w for w in warns if text in w]
        assert hit and hit[0].endswith(f"/filters/{kind}/east.xml:{line})"), (text, p.stderr)
    assert took < 10, f"{took:.1f}s (the prediction itself is checked below)"
    t0 = time.monotonic()
    preds = predict_traffic(load_topology(FIXTURES / kind / "topology.yaml"))
    assert time.monotonic() - t0 < 2
    bad = [p for p in preds if not p.routable]
    assert len(bad) == len(BLOCKED[kind]) and all(p.blocked_by and p.blocked_by.line for p in bad)


@pytest.mark.parametrize("example", ["examples/ops/hub-spoke.yaml", "examples/ops/topology.yaml"])
def test_reference_examples_route_every_family(example: str) -> None:
    preds = predict_traffic(load_topology(ROOT / example))
    assert preds and all(p.routable for p in preds), [p.why for p in preds if not p.routable]
    assert {p.family for p in preds} >= {"topology", "tenant", "instance-status", "initializer"}


def test_activemq_matching_rules() -> None:
    assert to_amq("topology/#") == "topology.>" and to_amq("a/+/c.d") == "a.*.c/d"
    assert filter_matches("topology.>", "topology.>") and filter_matches("topology.>", "topology.X")
    assert filter_matches("topology.>", "topology"), "A matches A.>"
    assert not filter_matches("topology.>", ">"), "a `>` consumer is refused by neither"
    assert not filter_matches("topology.X", "topology.>"), "an exact entry leaves the wildcard demand"
    assert not filter_matches("instance.notifier.>", "instance.>")
    assert filter_matches("instance.>", "instance.notifier.>")
    assert filter_matches("topology.*", "topology.>") and not filter_matches("a.*", "a.b.c")
    assert filter_matches(
        "ActiveMQ.Advisory.Consumer.Topic.instance.>", "ActiveMQ.Advisory.Consumer.Topic.instance.status.>"
    )


def test_yaml_lists_block_and_static_include_carries() -> None:
    data = {
        "name": "t",
        "groups": [{"name": "hub"}, {"name": "east"}],
        "bridges": [{"from": "east", "to": "hub", "duplex": True, "excluded_destinations": ["tenant.>"]}],
    }
    bad = [p for p in predict_traffic(parse_topology(data, "t")) if not p.routable]
    assert [(p.family, p.key) for p in bad] == [("tenant", "hub->east")]
    assert bad[0].blocked_by and bad[0].blocked_by.kind == "excludedDestinations"
    data["bridges"][0] = {"from": "east", "to": "hub", "duplex": True, "attributes": {"staticBridge": True}}
    data["bridges"][0]["statically_included_destinations"] = ["topology.>", "instance.>", "initializer.>"]
    bad = [p for p in predict_traffic(parse_topology(data, "t")) if not p.routable]
    assert {p.family for p in bad} == {"tenant", "application-signup"}


def test_chain_of_500_groups_is_fast_and_grouped() -> None:
    t = parse_topology(chain(500), "chain")
    start = time.monotonic()
    preds = predict(t)
    warns = grouped_warnings(preds) + grouped_warnings(predict_traffic(t))
    assert time.monotonic() - start < 60
    assert sum(not p.routable and p.must == "deliver" for p in preds) == 500 * 499 - 499
    assert len(warns) < 20 and any(w.startswith("124,251 paths: network_ttl 1 is too small") for w in warns)


def test_yaml_lists_render_as_network_connector_children(tmp_path: Path) -> None:
    data = {
        "name": "t",
        "groups": [{"name": "hub", "kind": "standalone"}, {"name": "east", "kind": "standalone"}],
        "bridges": [
            {
                "from": "east",
                "to": "hub",
                "uri": "static",
                "excluded_destinations": ["topology.>"],
                "dynamically_included_destinations": ["instance.>", "queue://jobs.*"],
            }
        ],
    }
    plan = make_plan(parse_topology(data, "t"), tmp_path)
    xml = render_broker(plan, plan.brokers["east-1"])["activemq.xml"]
    nc = ET.fromstring(xml.encode()).find(".//{*}networkConnector")
    assert nc is not None
    got = {c.tag.split("}")[1]: [(d.tag.split("}")[1], d.get("physicalName")) for d in c] for c in nc}
    assert got == {
        "excludedDestinations": [("topic", "topology.>")],
        "dynamicallyIncludedDestinations": [("topic", "instance.>"), ("queue", "jobs.*")],
    }


def test_yaml_lists_are_cited_with_their_line(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text(
        "name: t\n"
        "groups: [{name: hub}, {name: east}]\n"
        "bridges:\n"
        "  - from: east\n"
        "    to: hub\n"
        "    duplex: true\n"
        "    excluded_destinations:\n"
        "      - instance.>\n"
        "      - topology.>\n"
    )
    bad = {p.family: p for p in predict_traffic(load_topology(f)) if not p.routable}
    assert set(bad) == {"topology", "instance-notifier", "instance-status"}
    block = bad["topology"].blocked_by
    assert block and (block.file, block.line, block.pattern) == (str(f), 9, "topology.>")
    assert "t.yaml:9)" in bad["topology"].why
