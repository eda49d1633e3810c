"""`--backend swarm` past one machine (docs/fleet.md, "Adding nodes"): with `BFH_SWARM_ADDR` the
fault proxy's client links listen on the manager's address, `mb.urls` and the time endpoint name
it, and an address that is not this host's is refused before anything starts. The run itself is
on a one-node swarm (tests/swarm/conftest.py) with a non-loopback address of this host: what a
member on another node would dial."""

from __future__ import annotations

import configparser
import ipaddress
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from harness.backends import BackendError, client_host
from harness.backends.swarm import (
    ADDR_ENV,
    BIND_ENV,
    TIME_PORT_ENV,
    SwarmBackend,
    check_addresses,
    host_addresses,
)
from harness.contracts import runrecord
from harness.contracts.msglog import iter_records
from harness.deploy.plan import HOST, Plan, make_plan
from harness.faultproxy.addresses import split_hostport
from harness.topology import builtin_topology
from tests.swarm.test_swarm import bfh_run, left_behind


def reachable_addr() -> str:
    """A non-loopback IPv4 address of this host: docker0's when it has one (172.17.0.1)."""
    mine = sorted(a for a in host_addresses() if not a.startswith("127."))
    if not mine:
        pytest.skip("this host has no non-loopback IPv4 address")
    return "172.17.0.1" if "172.17.0.1" in mine else mine[0]


def foreign_addr() -> str:
    """A TEST-NET address that is not this host's."""
    mine = host_addresses()
    return next(str(a) for a in ipaddress.ip_network("198.51.100.0/24").hosts() if str(a) not in mine)


def plan_for(tmp_path: Path, host: str) -> Plan:
    return make_plan(builtin_topology("pair"), tmp_path, port_pool=itertools.count(20000), client_host=host)


def test_without_the_setting_the_links_stay_on_loopback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(ADDR_ENV, raising=False)
    assert client_host("swarm") == HOST
    plan = plan_for(tmp_path, client_host("swarm"))
    assert {split_hostport(u, "url")[0] for u in plan.client_urls("mqtt")} == {HOST}


def test_with_the_setting_client_links_listen_on_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    addr = reachable_addr()
    monkeypatch.setenv(ADDR_ENV, addr)
    assert client_host("local") == HOST  # the other backends: unchanged
    plan = plan_for(tmp_path, client_host("swarm"))
    assert {split_hostport(u, "url")[0] for u in plan.client_urls("mqtt")} == {addr}
    for lk in plan.links:  # bridges and every upstream stay on loopback
        assert split_hostport(lk.upstream, "upstream")[0] == HOST
        assert split_hostport(lk.listen, "listen")[0] == (addr if lk.kind == "client" else HOST)
    check_addresses(plan)  # agrees


def test_an_address_not_of_this_host_is_refused_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bad = foreign_addr()
    monkeypatch.setenv(ADDR_ENV, bad)
    be = SwarmBackend(plan_for(tmp_path, client_host("swarm")), tmp_path)
    with pytest.raises(BackendError, match=f"{ADDR_ENV}={bad}: not an address of this host"):
        be.preflight()
    assert be.client is None and be.time_server is None  # not even Docker asked

    monkeypatch.setenv(ADDR_ENV, reachable_addr())
    monkeypatch.setenv(BIND_ENV, bad)
    with pytest.raises(BackendError, match=f"{BIND_ENV}={bad}"):
        be.preflight()
    monkeypatch.delenv(BIND_ENV)
    monkeypatch.setenv(TIME_PORT_ENV, "70000")
    with pytest.raises(BackendError, match=f"{TIME_PORT_ENV}=70000"):
        be.preflight()
    monkeypatch.delenv(TIME_PORT_ENV)
    loopback_plan = SwarmBackend(plan_for(tmp_path, HOST), tmp_path)  # made without client_host
    with pytest.raises(BackendError, match="the plan's client links listen on 127.0.0.1"):
        loopback_plan.preflight()


def _urls_hosts(conf: Path) -> set[str]:
    cp = configparser.ConfigParser(interpolation=None)
    cp.read(conf, encoding="utf-8")
    urls = cp["agent"]["mb.urls"].split(",")
    return {split_hostport(u.split("://")[-1], "url")[0] for u in urls}


def _swarm_run(fn: Any) -> Any:
    """A real run on the one-node swarm: the extended tier's docker, broker and swarm marks."""
    for mark in (pytest.mark.timeout(1800), pytest.mark.swarm, pytest.mark.extended, pytest.mark.broker):
        fn = mark(fn)
    return pytest.mark.docker(fn)


@_swarm_run
def test_members_reach_the_manager_at_its_advertised_address(swarm: Any, tmp_path: Path) -> None:
    addr = reachable_addr()
    row = bfh_run(["fleet-masterslave", "--fleet", "5"], tmp_path, env={ADDR_ENV: addr})
    assert row["verdict"] == "pass" and row["exit"] == 0, (row["reasons"], row["stderr"])
    run_dir = Path(row["run_dir"])
    run = runrecord.read(run_dir) or {}
    # the proxy listened there for the clients only; nothing of the clients' on loopback
    for lk in run["links"]:
        assert split_hostport(lk["listen"], "listen")[0] == (addr if lk["kind"] == "client" else HOST), lk
    doc = json.loads((run_dir / "swarm" / "members.json").read_text(encoding="utf-8"))
    assert doc["clock"]["host"] == addr
    names = [m["name"] for m in doc["members"]]
    assert len(names) == 5
    for name in names:
        adir = run_dir / "agents" / name
        assert _urls_hosts(adir / "agent.conf") == {addr}
        records = list(iter_records(adir / "messages.jsonl"))
        connected = [r for r in records if r.get("event") == "connected"]
        # every connection at the advertised address: at start, and again after the master's kill
        assert {split_hostport(r["broker"], "broker")[0] for r in connected} == {addr}, (name, connected)
        assert {"initial", "reconnect"} <= {r.get("reason") for r in connected}, (name, connected)
        assert any(r.get("event") == "received" for r in records)
        assert abs(run["clocks"][name]["offset_s"]) < 0.05  # the time endpoint answered there
    assert left_behind(swarm, run_dir.name) == []


@_swarm_run
def test_sever_cuts_members_connections_at_the_advertised_address(swarm: Any, tmp_path: Path) -> None:
    """`sever` destroys the proxy's end of each connection, found by the link's listen address:
    the members' connections to 172.17.0.1 are cut as a local agent's to 127.0.0.1 are. (The
    verdict is not asserted: a fleet member's two roles share one link, and independent_connections
    blames a cut that lands beside the next one.)"""
    addr = reachable_addr()
    row = bfh_run(["one-connection-cut", "--fleet", "2"], tmp_path, env={ADDR_ENV: addr})
    run_dir = Path(row["run_dir"])
    cuts = [
        (r["ts"], r["params"]["client_port"])
        for r in iter_records(run_dir / "faults.jsonl")
        if r["fault"] == "sever" and r["event"] == "fault_start"
    ]
    assert len(cuts) >= 3, (cuts, row["reasons"], row["stderr"])  # the controllers' and the members'
    doc = json.loads((run_dir / "swarm" / "members.json").read_text(encoding="utf-8"))
    names = [m["name"] for m in doc["members"]]
    assert len(names) == 2
    for name in names:
        records = list(iter_records(run_dir / "agents" / name / "messages.jsonl"))
        lost = [
            r
            for r in records
            if r.get("event") == "disconnected" and str(r.get("reason")).startswith("connection_lost")
        ]
        assert lost, (name, records)  # a cut reached this member on its own node's side
        assert all(any(t <= r["ts"] <= t + 3.5 for t, _ in cuts) for r in lost), (name, lost, cuts)
        back = [r for r in records if r.get("event") == "connected" and r.get("reason") == "reconnect"]
        assert back and {split_hostport(r["broker"], "broker")[0] for r in back} == {addr}, (name, back)
    assert left_behind(swarm, run_dir.name) == []
