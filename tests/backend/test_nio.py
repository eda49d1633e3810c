"""A group served by NIO transports with connection limits (issue 44 item 2) starts, fails over
and carries MQTT and STOMP traffic through the fault proxy, on real brokers; the run folder keeps
the brokers' accepted connections and CPU over the run (broker-usage.jsonl) and the report draws
them. The generated activemq.xml's URIs: tests/topology/test_connector_limits.py."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.contracts import brokerusage, runrecord
from harness.run.handrun import HandRun
from harness.topology import loads_topology

pytestmark = [pytest.mark.broker, pytest.mark.extended, pytest.mark.timeout(600)]

STORM = """\
name: storm
groups:
  - name: pair
    connectors:
      mqtt: {nio: true, maximum_connections: 2000, max_frame_size: 1048576,
             transport: {closeAsync: false}}
      stomp: {nio: true, maximum_connections: 2000}
      openwire: {nio: true}
"""


def test_nio_pair_fails_over_and_carries_traffic(tmp_path: Path) -> None:
    with HandRun(loads_topology(STORM), tmp_path, label="nio-pair") as run:
        run_dir = run.run_dir
        conf = run_dir / "brokers" / "pair-1" / "conf" / "activemq.xml"
        uris = [c.get("uri", "") for c in ET.parse(conf).iter() if c.tag.endswith("transportConnector")]
        assert any(u.startswith("mqtt+nio://") and "maximumConnections=2000" in u for u in uris), uris
        assert any(u.startswith("stomp+nio://") for u in uris) and any(u.startswith("nio://") for u in uris)
        run.start_agent(name="mqtt-1", count=150, rate=20)
        run.start_agent(name="stomp-1", protocol="stomp", count=150, rate=20)
        assert run.wait_sent(60)
        run.faults.kill("master:pair")
        verdict = run.judge()
    summary = run.result.summary if run.result else None
    assert verdict.ok, (summary or {}).get("broken")
    deliveries = (summary or {}).get("deliveries", {})
    assert deliveries.get("ok", 0) >= 300 and not deliveries.get("lost"), deliveries
    # the brokers' side over the run: both members sampled, the connections the agents made
    # counted at the master before the kill and at the new master after it
    usage = brokerusage.series(brokerusage.read(run_dir))
    assert set(usage) == {"pair-1", "pair-2"}, usage.keys()
    for broker in usage:
        assert max(c or 0 for _, c, _ in usage[broker]) >= 2, (broker, usage[broker][:5])
        assert any(u is not None and u > 0 for _, _, u in usage[broker])
    obs = (runrecord.read(run_dir) or {}).get("observations", {})
    assert obs["broker_usage"]["brokers"]["pair-2"]["conns_max"] >= 2
    html = (run_dir / "report.html").read_text()
    assert 'id="broker-usage"' in html and "pair-1" in html
