"""Compose files generated from topologies: the shipped ones are current, every connection goes
through the proxy, and topologies the generator cannot express are refused with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness.backends.compose import BRIDGE_BASE, ComposeError, render, write
from harness.topology import builtin_topology

COMPOSE = Path(__file__).resolve().parents[2] / "compose"


@pytest.mark.parametrize("name", ["pair", "network-of-pairs"])
def test_shipped_compose_files_are_generated_and_current(name: str) -> None:
    files = render(builtin_topology(name))
    shipped = {str(p.relative_to(COMPOSE)) for p in COMPOSE.rglob("*") if p.is_file()}
    mine = {rel for rel in shipped if rel == f"{name}.yml" or rel.startswith(f"conf/{name}/")}
    assert mine == set(files), f"compose/ differs from `bfh compose {name}`: regenerate it"
    for rel, text in files.items():
        assert (COMPOSE / rel).read_text(encoding="utf-8") == text, f"compose/{rel} is stale"


def test_every_connection_goes_through_the_proxy() -> None:
    topo = builtin_topology("network-of-pairs")
    files = render(topo, client_ports=list(range(30000, 30012)), api_port=30999)
    doc = yaml.safe_load(files["network-of-pairs.yml"])
    proxies = json.loads(files["conf/network-of-pairs/proxies.json"])
    brokers = sorted(topo.broker_names())
    assert sorted(s for s in doc["services"] if s != "toxiproxy") == brokers
    # one client link per connector of every member, published on loopback at the given ports
    published = doc["services"]["toxiproxy"]["ports"]
    assert published[0] == "127.0.0.1:30999:30999"
    assert sorted(published[1:]) == sorted(f"127.0.0.1:{p}:{p}" for p in range(30000, 30012))
    upstreams = {p["upstream"] for p in proxies}
    assert upstreams == {f"{b}:{port}" for b in brokers for port in (1883, 61613, 61616)}
    # bridges dial the proxy's bridge links, never a broker directly
    bridge_ports = {int(p["listen"].rsplit(":", 1)[1]) for p in proxies if p["name"].startswith("bridge-")}
    assert len(bridge_ports) == 8 and min(bridge_ports) >= BRIDGE_BASE
    for b in brokers:
        xml = files[f"conf/network-of-pairs/{b}/activemq.xml"]
        assert "masterslave:(tcp://toxiproxy:" in xml and "127.0.0.1" not in xml
        assert 'uri="mqtt://0.0.0.0:1883"' in xml and '<kahaDB directory="/store/kahadb"' in xml
        group = b.rsplit("-", 1)[0]
        assert f"{group}-store:/store" in doc["services"][b]["volumes"]
    assert set(doc["volumes"]) == {"a-store", "b-store"}


@pytest.mark.parametrize(("name", "why"), [("secure-pair", "TLS"), ("seed003-ha-network", "multicast")])
def test_unsupported_topologies_are_refused_with_nothing_written(tmp_path: Path, name: str, why: str) -> None:
    with pytest.raises(ComposeError, match=why):
        write(builtin_topology(name), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_wrong_number_of_client_ports_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ComposeError, match="needs 6 distinct client ports"):
        write(builtin_topology("pair"), tmp_path, client_ports=[30000, 30001])
    assert list(tmp_path.iterdir()) == []


def test_cli_writes_files_and_refuses_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli.main import main

    assert main(["compose", "pair", "--out", str(tmp_path / "ok"), "--client-port", "25000"]) == 0
    text = (tmp_path / "ok" / "pair.yml").read_text()
    assert "# mb.urls (mqtt, group pair) = 127.0.0.1:25000,127.0.0.1:25003" in text
    assert main(["compose", "secure-pair", "--out", str(tmp_path / "tls")]) == 2
    assert main(["compose", "no-such-topology", "--out", str(tmp_path / "none")]) == 2
    assert not (tmp_path / "tls").exists() and not (tmp_path / "none").exists()
    assert "TLS connectors" in capsys.readouterr().err
