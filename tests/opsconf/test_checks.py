# ruff: noqa: E501  (real-style XML snippets are kept on one line each, as in the files they mimic)
"""Static checks of imported deployment files (`config:`): each check against a malformed,
real-style activemq.xml, as `bfh topology validate` reports it (file:line: problem. Fix: ...)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.topology import TopologyError, load_topology
from harness.topology.confcheck import check

ROOT = Path(__file__).resolve().parents[2]
STOCK = Path("/etc/activemq/instances-available/main/activemq.xml")
EXAMPLE = ROOT / "examples/ops"

BROKER = """<?xml version="1.0" encoding="UTF-8"?>
<beans xmlns="http://www.springframework.org/schema/beans">
    <broker xmlns="http://activemq.apache.org/schema/core" brokerName="mq-a1" dataDirectory="${{activemq.data}}">
{body}
    </broker>
</beans>
"""
GOOD_STORE = """        <persistenceAdapter>
            <kahaDB directory="/mnt/shared/a/kahadb"/>
        </persistenceAdapter>"""
GOOD_CONNECTORS = """        <transportConnectors>
            <transportConnector name="openwire" uri="tcp://0.0.0.0:61616"/>
            <transportConnector name="mqtt" uri="mqtt://0.0.0.0:1883"/>
        </transportConnectors>"""


def topo(tmp_path: Path, body: str, extra: str = "", group: str = "") -> Path:
    (tmp_path / "mq-a.xml").write_text(BROKER.format(body=body))
    (tmp_path / "b.xml").write_text(
        BROKER.format(body=GOOD_STORE.replace("/a/", "/b/") + "\n" + GOOD_CONNECTORS)
    )
    f = tmp_path / "topo.yaml"
    f.write_text(
        "name: t\ngroups:\n  - name: a\n    kind: pair\n    config: mq-a.xml\n" + group
        + "  - name: b\n    kind: pair\n    config: b.xml\n"
        + "hosts:\n  mq-b1:61616: b-1\n  mq-b2:61616: b-2\n" + extra
    )  # fmt: skip
    return f


def error_of(path: Path) -> str:
    with pytest.raises(TopologyError) as e:
        load_topology(path)
    return str(e.value)


def line_of(path: Path, needle: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if needle in ln)


def test_a_good_file_loads_with_no_finding(tmp_path: Path) -> None:
    f = topo(tmp_path, GOOD_STORE + "\n" + GOOD_CONNECTORS)
    t = load_topology(f)
    assert check(t) == []
    assert set(t.group("a").connectors) == {"mqtt", "openwire"}


def test_protocol_the_agents_use_without_connector_is_an_error(tmp_path: Path) -> None:
    body = (
        GOOD_STORE
        + '\n        <transportConnectors>\n            <transportConnector name="openwire" uri="tcp://0.0.0.0:61616"/>\n        </transportConnectors>'
    )
    f = topo(tmp_path, body)
    msg = error_of(f)
    xml = tmp_path / "mq-a.xml"
    assert f"{xml}:{line_of(xml, '<transportConnectors>')}: the agents use MQTT" in msg
    assert "no mqtt transportConnector. Fix:" in msg and "connectors: [mqtt, openwire]" in msg


def test_protocol_listed_in_the_topology_is_added_with_a_warning(tmp_path: Path) -> None:
    body = (
        GOOD_STORE
        + '\n        <transportConnectors>\n            <transportConnector name="openwire" uri="tcp://0.0.0.0:61616"/>\n        </transportConnectors>'
    )
    f = topo(tmp_path, body, group="    connectors: [mqtt, openwire]\n")
    [w] = check(load_topology(f))
    assert w.severity == "warning" and "harness adds one to the test copy" in w.message


def test_pair_members_that_do_not_share_a_store_warn(tmp_path: Path) -> None:
    body = (
        '        <persistenceAdapter>\n            <kahaDB directory="${activemq.base}/data/kahadb"/>\n        </persistenceAdapter>\n'
        + GOOD_CONNECTORS
    )
    [w] = check(load_topology(topo(tmp_path, body)))
    assert w.severity == "warning" and "would not share a store" in w.message
    assert w.line == line_of(tmp_path / "mq-a.xml", "<kahaDB")


def test_a_store_that_cannot_be_shared_is_an_error(tmp_path: Path) -> None:
    body = (
        "        <persistenceAdapter>\n            <memoryPersistenceAdapter/>\n        </persistenceAdapter>\n"
        + GOOD_CONNECTORS
    )
    msg = error_of(topo(tmp_path, body))
    assert "<memoryPersistenceAdapter> keeps messages in memory only" in msg and "cannot share it" in msg


def test_persistent_false_on_a_pair_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    f = topo(tmp_path / "x", GOOD_STORE + "\n" + GOOD_CONNECTORS)
    xml = tmp_path / "x" / "mq-a.xml"
    xml.write_text(xml.read_text().replace('brokerName="mq-a1"', 'brokerName="mq-a1" persistent="false"'))
    assert "persistent=\"false\": the members of pair 'a' cannot share a store" in error_of(f)


def test_network_connector_host_not_in_hosts_is_an_error(tmp_path: Path) -> None:
    nc = '        <networkConnectors>\n            <networkConnector name="to-c" uri="masterslave:(tcp://mq-c1:61616,tcp://mq-b2:61616)"/>\n        </networkConnectors>\n'
    f = topo(tmp_path, nc + GOOD_STORE + "\n" + GOOD_CONNECTORS)
    msg = error_of(f)
    xml = tmp_path / "mq-a.xml"
    assert f"{xml}:{line_of(xml, 'to-c')}: networkConnector 'to-c' names mq-c1:61616, which is not in" in msg
    assert "add `mq-c1:61616: <member>` under hosts:" in msg


def test_static_master_slave_list_is_flagged_with_its_scenario(tmp_path: Path) -> None:
    nc = '        <networkConnectors>\n            <networkConnector name="NC_1" uri="static://(tcp://mq-b1:61616,tcp://mq-b2:61616)"/>\n        </networkConnectors>\n'
    t = load_topology(topo(tmp_path, nc + GOOD_STORE + "\n" + GOOD_CONNECTORS))
    [w] = check(t)
    assert w.severity == "warning" and "seed 002's anti-pattern" in w.message
    assert "bfh validate --scenarios network" in w.message and "masterslave:" in w.fix
    assert [(b.source, b.target, b.uri) for b in t.bridges] == [("a", "b", "static-list")]


def test_pair_aware_bridges_are_not_flagged(tmp_path: Path) -> None:
    for uri in (
        "masterslave:(tcp://mq-b1:61616,tcp://mq-b2:61616)",
        "static:(failover:(tcp://mq-b1:61616,tcp://mq-b2:61616)?randomize=false&amp;maxReconnectAttempts=0)",
    ):
        nc = f'        <networkConnectors>\n            <networkConnector name="n" uri="{uri}"/>\n        </networkConnectors>\n'
        d = tmp_path / str(abs(hash(uri)))
        d.mkdir()
        assert check(load_topology(topo(d, nc + GOOD_STORE + "\n" + GOOD_CONNECTORS))) == []


def test_conflicting_ports_are_an_error(tmp_path: Path) -> None:
    body = GOOD_STORE + GOOD_CONNECTORS.replace(
        "</transportConnectors>",
        '    <transportConnector name="stomp" uri="stomp://0.0.0.0:61616"/>\n        </transportConnectors>',
    )
    msg = error_of(topo(tmp_path, body))
    assert "port 61616 is already used by connector 'openwire'" in msg and "Address already in use" in msg


def test_unknown_elements_are_an_error_with_a_suggestion(tmp_path: Path) -> None:
    body = GOOD_STORE + "\n" + GOOD_CONNECTORS + "\n        <destinationPolicys/>\n"
    msg = error_of(topo(tmp_path, body))
    assert (
        "<destinationPolicys> is not an element <broker> accepts" in msg
        and "did you mean <destinationPolicy>?" in msg
    )
    body = (
        GOOD_STORE
        + "\n"
        + GOOD_CONNECTORS.replace('<transportConnector name="mqtt"', '<transportconnector name="mqtt"')
    )
    (tmp_path / "y").mkdir()
    assert "<transportconnector> is not an element <transportConnectors> accepts" in error_of(
        topo(tmp_path / "y", body)
    )


def test_undefined_property_and_broken_xml_are_errors(tmp_path: Path) -> None:
    body = GOOD_STORE.replace("/mnt/shared/a/kahadb", "${shared.mount}/kahadb") + "\n" + GOOD_CONNECTORS
    assert "property ${shared.mount} is not defined" in error_of(topo(tmp_path, body))
    (tmp_path / "z").mkdir()
    f = topo(tmp_path / "z", GOOD_STORE + "\n" + GOOD_CONNECTORS + "\n        <systemUsage>\n")
    assert "mq-a.xml:" in error_of(f) and "not well-formed XML" in error_of(f)


def test_hosts_must_name_members(tmp_path: Path) -> None:
    f = topo(tmp_path, GOOD_STORE + "\n" + GOOD_CONNECTORS, extra="  mq-c1:61616: c-1\n")
    assert "hosts.mq-c1:61616: 'c-1' is not a broker of this topology" in error_of(f)


@pytest.mark.skipif(not STOCK.exists(), reason="Debian's activemq package is not installed")
def test_stock_debian_file_without_mqtt_is_a_clear_error(tmp_path: Path) -> None:
    f = tmp_path / "stock.yaml"
    f.write_text(f"name: stock\ngroups:\n  - name: prod\n    kind: pair\n    config: {STOCK}\n")
    msg = error_of(f)
    assert f"{STOCK}:49: the agents use MQTT" in msg


def test_example_network_loads_with_bridges_from_its_files() -> None:
    t = load_topology(EXAMPLE / "topology.yaml")
    assert check(t) == []
    assert sorted((b.source, b.target, b.uri) for b in t.bridges) == [
        ("a", "b", "masterslave"),
        ("b", "a", "masterslave"),
    ]
