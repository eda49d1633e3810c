"""Connectors for a storm (issue 44 item 2): NIO transports and ActiveMQ's connection limits in
the topology, their located errors, and the transportConnector URIs the generated activemq.xml
carries. Pure logic, no broker (tests/backend/test_nio.py starts them)."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.deploy.brokerconf import render_broker
from harness.deploy.plan import make_plan
from harness.topology import TopologyError
from harness.topology.loader import load_topology

STORM = """\
name: storm
groups:
  - name: a
    connectors:
      mqtt: {nio: true, maximum_connections: 5000, max_frame_size: 1048576,
             transport: {soTimeout: 60000, closeAsync: false}}
      stomp: {nio: true, tls: true}
      openwire: {nio: true, maximum_connections: 100}
"""
AMQ = "{http://activemq.apache.org/schema/core}"


def _uris(tmp_path: Path, text: str) -> dict[str, str]:
    f = tmp_path / "t.yaml"
    f.write_text(text)
    plan = make_plan(load_topology(f), tmp_path / "run", port_pool=itertools.count(20000))
    ssl = {"keystore": "/x/k.p12", "truststore": "/x/t.p12", "password": "p"}
    xml = render_broker(plan, plan.brokers["a-1"], ssl=ssl)["activemq.xml"]
    root = ET.fromstring(xml)
    return {c.get("name", ""): c.get("uri", "") for c in root.iter(f"{AMQ}transportConnector")}


def test_nio_and_limits_reach_the_transport_connectors(tmp_path: Path) -> None:
    uris = _uris(tmp_path, STORM)
    assert uris["mqtt"] == (
        "mqtt+nio://127.0.0.1:20000?maximumConnections=5000&wireFormat.maxFrameSize=1048576"
        "&transport.soTimeout=60000&transport.closeAsync=false"
    )
    assert uris["stomp"] == "stomp+nio+ssl://127.0.0.1:20001"
    assert uris["openwire"] == "nio://127.0.0.1:20002?maximumConnections=100"


def test_defaults_are_unchanged(tmp_path: Path) -> None:
    uris = _uris(tmp_path, "name: plain\ngroups:\n  - name: a\n    connectors: [mqtt, openwire]\n")
    assert uris["mqtt"] == "mqtt://127.0.0.1:20000" and uris["openwire"] == "tcp://127.0.0.1:20001"


@pytest.mark.parametrize(
    ("line", "snippet", "wanted"),
    [
        (7, "maximum_connections: 0", "maximum_connections: 0 is out of range"),
        (7, "max_frame_size: 12", "max_frame_size: 12 is out of range"),
        (7, "transport: {soTimeOut: 1}", "did you mean 'soTimeout'?"),
        (7, 'transport: {"transport.backlog": 10}', "without its 'transport.' prefix"),
        (7, "transport: {maximumConnections: 10}", "set the connector's maximum_connections"),
        (7, "transport: {threadName: 'a&b'}", "cannot be written into a URI"),
        (7, "transport: {subscriptionStrategy: mqtt-virtual}", "is not an MQTT subscription strategy"),
        (7, "nio: maybe", "nio"),
    ],
)
def test_bad_values_are_located(tmp_path: Path, line: int, snippet: str, wanted: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(
        "name: bad\ngroups:\n  - name: a\n    connectors:\n      openwire: {}\n      mqtt:\n"
        f"        {snippet}\n"
    )
    with pytest.raises(TopologyError) as e:
        load_topology(f)
    msg = str(e.value)
    assert f"bad.yaml:{line}:" in msg and "groups[0].connectors.mqtt" in msg and wanted in msg, msg
