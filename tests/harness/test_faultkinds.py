"""The fault registry: parameters, and every kind started, stopped and healed through a fake
backend and a real fault proxy (the builtin server), its windows read back from faults.jsonl."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from harness.backends.base import BackendError
from harness.contracts.faultlog import FaultLog, Window, read_windows
from harness.deploy.plan import Plan, make_plan
from harness.faultproxy.client import ToxiproxyClient
from harness.faultproxy.launcher import FaultProxyHandle
from harness.faults.actions import ACTIONS, supports
from harness.faults.apply import Faults
from harness.faults.kinds import KINDS, FaultParamsError, LatencyParams, kind, logged_names, markdown_table
from harness.topology import builtin_topology
from tests.faultproxy.util import builtin_fault_proxy

from .fakes import FakeBackend, FakeNetworkBackend, FakeProxy, fake_plan

DOCS = Path(__file__).resolve().parents[2] / "docs" / "scenarios.md"


# -- parameters ----------------------------------------------------------------------------------
def test_params_have_their_defaults_in_the_kind() -> None:
    assert kind("latency").parse({}) == LatencyParams(latency_ms=500, jitter_ms=0)
    assert kind("latency").parse({"latency_ms": "300"}).model_dump() == {"latency_ms": 300, "jitter_ms": 0}
    assert kind("kill").parse({}).model_dump() == {"wait_takeover": True, "timeout_s": 60.0}
    assert kind("partition").parse(None).model_dump() == {}


@pytest.mark.parametrize(
    ("fault", "params", "words"),
    [
        ("latency", {"latency_ms": -1}, "latency: latency_ms: Input should be greater than or equal to 0"),
        ("latency", {"latency": 300}, "latency: latency: Extra inputs are not permitted"),
        ("bandwidth", {"rate_kbps": "fast"}, "bandwidth: rate_kbps: Input should be a valid integer"),
        ("slicer", {"average_size": 0}, "slicer: average_size"),
        ("partition", {"ms": 1}, "partition: ms"),
        ("sever", {"gap_s": -1}, "sever: gap_s"),
    ],
)
def test_bad_params_name_the_kind_and_the_field(fault: str, params: dict, words: str) -> None:
    with pytest.raises(FaultParamsError, match=words):
        kind(fault).parse(params)


def test_unknown_kind_lists_the_known_ones() -> None:
    with pytest.raises(FaultParamsError, match="unknown fault 'explode'; known: kill, stop"):
        kind("explode")


def test_flags_the_verdict_reads() -> None:
    assert logged_names("heal") == {"start"}
    assert logged_names("outage") == {"kill", "stop", "pause", "isolate", "down", "link_down", "partition"}
    names = [n for k in KINDS.values() for n in (k.name, *k.aliases)]
    assert len(names) == len(set(names)), "a name logged for two kinds"


def test_every_kind_has_one_action() -> None:
    assert list(ACTIONS) and set(ACTIONS) == set(KINDS)
    assert all(a.name == n for n, a in ACTIONS.items())


def test_the_kinds_are_data_importing_nothing_of_the_harness() -> None:
    """The verdict reads the flags: the data module must not pull in backends, proxy or actions."""
    import ast

    import harness.faults.kinds as data

    tree = ast.parse(Path(data.__file__).read_text(encoding="utf-8"))
    imported = [
        n.module if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    ]
    assert not [m for m in imported if m and m.startswith("harness")], imported


def test_docs_table_is_the_registry() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert markdown_table() in text, "docs/scenarios.md: paste harness.faults.kinds.markdown_table()"
    rows = [ln for ln in text.splitlines() if ln.startswith("| `")]
    listed = [ln.split("`")[1] for ln in rows if "| broker |" in ln or "| link |" in ln]
    assert listed == list(KINDS)


# -- every kind through a fake backend and the real fault proxy ---------------------------------
@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultProxyHandle]:
    with builtin_fault_proxy(tmp_path_factory.mktemp("fp"), seed=7) as handle:
        yield handle


@pytest.fixture
def plan(tmp_path: Path) -> Plan:
    return make_plan(builtin_topology("network-of-pairs"), tmp_path)  # real free ports: the proxy binds them


@pytest.fixture
def client(proxy: FaultProxyHandle, plan: Plan) -> Iterator[ToxiproxyClient]:
    c = proxy.client
    c.populate([lk.proxy_spec() for lk in plan.links])
    try:
        yield c
    finally:
        for name in list(c.proxies()):
            c.delete_proxy(name)


def faults_for(backend: FakeBackend, client: ToxiproxyClient, tmp_path: Path) -> Faults:
    return Faults(backend.plan, backend, client, FaultLog(tmp_path / "faults.jsonl", "t"))


def windows(tmp_path: Path) -> list[Window]:
    return read_windows(tmp_path / "faults.jsonl").windows


def clean(client: ToxiproxyClient, link: str) -> bool:
    p = client.get_proxy(link)
    return p["enabled"] and not p["toxics"]


LINK_EFFECTS = {  # kind -> (params, toxic types on each link; None: the link is disabled)
    "down": ({}, None),
    "partition": ({}, {"timeout_upstream", "timeout_downstream"}),
    "latency": ({"latency_ms": 300, "jitter_ms": 50}, {"latency_downstream"}),
    "reset_peer": ({"timeout_ms": 100}, {"reset_peer_downstream"}),
    "slicer": ({"average_size": 16}, {"slicer_downstream"}),
    "bandwidth": ({"rate_kbps": 8}, {"bandwidth_downstream"}),
    "limit_data": ({"bytes": 10}, {"limit_data_downstream"}),
}


@pytest.mark.parametrize("fault", list(LINK_EFFECTS))
def test_link_kind_starts_on_every_link_of_its_targets_and_stops(fault, plan, client, tmp_path) -> None:
    be = FakeBackend(plan)
    faults = faults_for(be, client, tmp_path)
    params, toxics = LINK_EFFECTS[fault]
    handle = faults.start(fault, ["a-1", "b-2-mqtt"], params)
    names = sorted(lk.name for lk in plan.links_of("a-1")) + ["b-2-mqtt"]
    for n in names:
        p = client.get_proxy(n)
        if toxics is None:
            assert p["enabled"] is False
        else:
            assert {t["name"] for t in p["toxics"]} == toxics, n
    assert clean(client, "a-2-mqtt"), "a link of no target was touched"
    assert (be.mirror.held == set(names)) is (fault == "down"), "only down keeps the mirror off its links"
    [w] = windows(tmp_path)
    assert (w.fault, w.target, w.end) == (fault, "a-1,b-2-mqtt", None)
    assert w.params == kind(fault).parse(params).model_dump()  # defaults filled in the log
    faults.stop(handle)
    assert all(clean(client, n) for n in names)
    assert not be.mirror.held
    [w] = windows(tmp_path)
    assert w.end is not None and w.end >= w.start
    assert not faults.open_windows()


@pytest.mark.parametrize("fault", ["kill", "stop"])
def test_kill_and_stop_end_at_the_takeover_and_stop_starts_the_broker_again(
    fault, plan, client, tmp_path
) -> None:
    be = FakeBackend(plan)
    faults = faults_for(be, client, tmp_path)
    handle = faults.start(fault, "a-1")
    assert be.state("a-1") == "down" and be.master("a") == "a-2"
    assert handle.results["a-1"] >= 0 and not handle.windows
    faults.stop(handle)
    assert be.state("a-1") == "slave"
    down, start = windows(tmp_path)
    assert (down.fault, down.target, down.params["group"], down.params["new_master"]) == (
        fault,
        "a-1",
        "a",
        "a-2",
    )
    assert down.end is not None and "takeover_s" in down.params
    assert (start.fault, start.target, start.end is not None) == ("start", "a-1", True)


def test_kill_of_several_brokers_does_not_wait_and_reports_the_first_error(plan, client, tmp_path) -> None:
    be = FakeBackend(plan)
    faults = faults_for(be, client, tmp_path)
    faults.start("kill", ["a-1", "a-2"])
    assert be.master("a") is None
    assert all(w.end is not None and "takeover_s" not in w.params for w in windows(tmp_path))
    with pytest.raises(BackendError, match="a-1 is not running"):
        faults.start("kill", ["a-1", "b-1"])  # b-1 still killed: one target failing fails the step
    assert be.state("b-1") == "down"


def test_pause_holds_a_window_until_stop_resumes(plan, client, tmp_path) -> None:
    be = FakeBackend(plan)
    faults = faults_for(be, client, tmp_path)
    handle = faults.start("pause", ["a-1", "b-1"])
    assert be.state("a-1") == be.state("b-1") == "paused"
    assert [w.end for w in windows(tmp_path)] == [None, None]
    faults.stop(handle)
    assert be.called("resume") == ["a-1", "b-1"]
    assert all(w.end is not None for w in windows(tmp_path))


def test_restart_and_start_are_instant_windows(plan, client, tmp_path) -> None:
    be = FakeBackend(plan)
    faults = faults_for(be, client, tmp_path)
    faults.start("restart", "a-1")
    be.kill("b-2")
    faults.start("start", "b-2")
    assert be.called("restart") == ["a-1"] and be.alive("b-2")
    assert [(w.fault, w.end is not None) for w in windows(tmp_path)] == [("restart", True), ("start", True)]


def test_isolate_needs_a_backend_with_networks(plan, client, tmp_path) -> None:
    assert not supports("isolate", FakeBackend(plan)) and supports("isolate", FakeNetworkBackend(plan))
    with pytest.raises(BackendError, match="cannot isolate"):
        faults_for(FakeBackend(plan), client, tmp_path).start("isolate", "a-1")
    assert not windows(tmp_path), "nothing logged for a fault that never started"
    be = FakeNetworkBackend(plan)
    faults = faults_for(be, client, tmp_path)
    handle = faults.start("isolate", "a-1")
    assert be.isolated == {"a-1"}
    faults.stop(handle)
    assert not be.isolated and windows(tmp_path)[0].end is not None


class Upstream:
    """Accepts and holds connections on a given port (the broker a link points at)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_server(("127.0.0.1", port))
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self.conns.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


def non_loopback_addr() -> str | None:
    """A non-loopback IPv4 address of this host (docker0's 172.17.0.1 when it has one): where a
    swarm's client links listen with BFH_SWARM_ADDR."""
    mine = sorted(a.address for v in psutil.net_if_addrs().values() for a in v if a.family == socket.AF_INET)
    mine = [a for a in mine if not a.startswith("127.")]
    return "172.17.0.1" if "172.17.0.1" in mine else next(iter(mine), None)


@pytest.mark.parametrize("where", ["loopback", "advertised"])
def test_sever_cuts_each_client_connection_in_its_own_window(where, proxy, tmp_path) -> None:
    host = "127.0.0.1" if where == "loopback" else non_loopback_addr()
    if host is None:
        pytest.skip("this host has no non-loopback IPv4 address")
    plan = make_plan(builtin_topology("network-of-pairs"), tmp_path, client_host=host)
    client = proxy.client
    client.populate([lk.proxy_spec() for lk in plan.links])
    link = next(lk for lk in plan.links if lk.name == "a-1-mqtt")
    up = Upstream(link.upstream_port)
    clients = [socket.create_connection((host, link.listen_port)) for _ in range(2)]
    try:
        deadline = time.monotonic() + 5
        while len(up.conns) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        faults = faults_for(FakeBackend(plan), client, tmp_path)
        assert faults.sever("a-1-mqtt", gap_s=0.05) == 2
        for c in clients:
            c.settimeout(5)
            with pytest.raises(ConnectionResetError):  # the proxy's end destroyed by `ss -K`: a reset
                c.recv(1)
        ws = windows(tmp_path)
        assert [w.fault for w in ws] == ["sever", "sever"] and all(w.end is not None for w in ws)
        assert [w.params["client_port"] for w in ws] == sorted(c.getsockname()[1] for c in clients)
        with socket.create_connection((host, link.listen_port), timeout=5):
            pass  # the listener itself is left alone
    finally:
        for c in clients:
            c.close()
        up.close()
        for name in list(client.proxies()):
            client.delete_proxy(name)


def test_heal_all_heals_each_open_window_as_its_kind_heals(plan, client, tmp_path) -> None:
    be = FakeBackend(plan)
    faults = faults_for(be, client, tmp_path)
    faults.start("pause", "a-1")
    faults.start("down", "b-1")
    faults.start("latency", "bridges")
    faults.start("kill", "b-2", wait_takeover=False)  # closed at once: nothing for heal_all
    faults.heal_all()
    assert be.state("a-1") != "paused"
    assert all(clean(client, lk.name) for lk in plan.links)
    assert not be.mirror.held
    ws = windows(tmp_path)
    assert all(w.end is not None for w in ws)
    assert sorted(w.fault for w in ws if w.params.get("healed_by") == "heal_all") == [
        "down",
        "latency",
        "pause",
    ]
    assert not faults.open_windows()


class BareContext:
    """The least a fault action may use (harness.faults.context.FaultContext): no `Faults`."""

    def __init__(self, backend: FakeBackend) -> None:
        self.backend = backend
        self.proxy = FakeProxy()
        self.opened: dict[str, tuple[str, str, dict]] = {}
        self.closed: list[str] = []

    def links(self, target: str) -> list:
        return self.backend.plan.links_of(target)

    def group_of(self, broker: str) -> str:
        return self.backend.plan.brokers[broker].group

    def begin(self, fault: str, target: str, params: dict | None = None, links: list | None = None) -> str:
        fid = f"f{len(self.opened) + 1}-{fault}"
        self.opened[fid] = (fault, target, params or {})
        return fid

    def end(self, fault_id: str, **extra: object) -> None:
        self.closed.append(fault_id)

    def window(self, fault_id: str) -> None:
        return None


def test_actions_work_on_the_narrow_context_and_compose_kinds(tmp_path: Path) -> None:
    """A kill's stop is the start action itself, not a new fault through Faults."""
    be = FakeBackend(fake_plan(tmp_path))
    ctx = BareContext(be)
    kill = ACTIONS["kill"]
    handle = kill.start(ctx, ["a-1"], kind("kill").parse({}))  # type: ignore[arg-type]
    assert be.state("a-1") == "down" and handle.results["a-1"] >= 0
    kill.stop(ctx, handle)  # type: ignore[arg-type]
    assert be.alive("a-1") and be.called("start_broker") == ["a-1"]
    assert [v[0] for v in ctx.opened.values()] == ["kill", "start"] and ctx.closed == list(ctx.opened)
    ACTIONS["partition"].start(ctx, ["b-1"], kind("partition").parse({}))  # type: ignore[arg-type]
    assert sorted(a[0] for a in ctx.proxy.called("black_hole")) == sorted(
        lk.name for lk in be.plan.links_of("b-1")
    )
