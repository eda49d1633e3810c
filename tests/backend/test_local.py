"""The local backend against real brokers: lifecycle, master tracking, faults, clear errors,
no orphans, stale-run cleanup, topologies side by side."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from harness.backends import BackendError
from harness.backends.brokerfiles import prepare_broker
from harness.backends.local import LocalBackend
from harness.deploy.plan import free_ports, make_plan
from harness.run.env import Environment
from harness.topology import builtin_topology, loads_topology

from .support import Consumer, Producer, addr, env_up

pytestmark = [pytest.mark.broker]
HERE = Path(__file__).parent
FIGURES: dict[str, object] = {}


def _refused(url: str) -> bool:
    try:
        with socket.create_connection(addr(url), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


def _round_trip(env: Environment, group: str, dest: str, n: int = 3) -> None:
    urls = env.mb_urls("stomp", group)
    cons = Consumer(urls, dest).start()
    prod = Producer(urls, dest)
    try:
        ids = {f"{dest}-{i}-{time.monotonic_ns()}" for i in range(n)}
        for mid in sorted(ids):
            prod.send(mid)
        assert not cons.wait_for(ids, 30), f"round trip on {group} failed"
    finally:
        cons.stop()
        prod.close()


@pytest.mark.masterslave
def test_pair_lifecycle_and_master_tracking(tmp_path: Path) -> None:
    with env_up(builtin_topology("pair-stomp"), tmp_path / "run") as env:
        be = env.backend
        assert isinstance(be, LocalBackend)
        assert be.states() == {"pair-1": "master", "pair-2": "slave"}
        assert be.master("pair") == "pair-1"
        log1, log2 = be.broker_log("pair-1").read_text(), be.broker_log("pair-2").read_text()
        assert "(pair-1, " in log1 and ") started" in log1
        assert "slave mode" in log2 and ") started" not in log2
        # A slave listens nowhere, and its proxied links refuse connections like its ports would.
        slave_url = env.plan.client_link("pair-2", "stomp").listen
        assert _refused(slave_url)
        _round_trip(env, "pair", "/queue/life")

        # kill -9 the master: the slave takes over; the killed member comes back as a slave.
        t0 = time.monotonic()
        be.kill("pair-1")
        assert not be.alive("pair-1") and be.state("pair-1") == "down"
        assert be.wait_master("pair", 30) == "pair-2"
        FIGURES["takeover_tuned_s"] = round(time.monotonic() - t0, 2)
        # The proxy follows: the dead member's link refuses, the new master's accepts.
        assert _refused(env.plan.client_link("pair-1", "stomp").listen)
        assert not _refused(env.plan.client_link("pair-2", "stomp").listen)
        be.start_broker("pair-1")
        assert be.state("pair-1") == "slave"
        with pytest.raises(BackendError, match="already running"):
            be.start_broker("pair-1")

        # A paused (SIGSTOP) master keeps the store lock: no takeover while it is paused.
        be.pause("pair-2")
        assert be.state("pair-2") == "paused"
        time.sleep(4)  # > lock_keep_alive + lock_acquire_sleep
        assert be.state("pair-1") == "slave" and be.master("pair") == "pair-2"
        be.resume("pair-2")
        _round_trip(env, "pair", "/queue/after-resume")

        # Graceful stop: the broker shuts down cleanly and the other member takes over.
        off = be.log_size("pair-2")
        be.stop("pair-2")
        assert "stopped" in be.log_since("pair-2", off)
        assert be.wait_master("pair", 30) == "pair-1"
        # restart() kills a running member (here: none running) and starts it again.
        be.restart("pair-2")
        assert be.state("pair-2") == "slave"
        be.restart("pair-2")
        assert be.state("pair-2") == "slave"
        _round_trip(env, "pair", "/queue/end")
        with pytest.raises(BackendError, match="unknown broker 'nope'"):
            be.kill("nope")
        FIGURES["ready_log"] = be.ready_log


@pytest.mark.extended
@pytest.mark.timeout(900)
@pytest.mark.masterslave
def test_takeover_default_vs_tuned_lock_intervals(tmp_path: Path) -> None:
    """kill -9 of the master, to the slave serving: ActiveMQ's default lock settings vs tuned."""
    results: dict[str, list[float]] = {}
    ready: list[float] = []
    for label, keep_alive, sleep in (("default", 0, 10000), ("tuned", 2000, 1000)):
        topo = loads_topology(
            f"name: takeover\ngroups:\n  - name: p\n    connectors: [openwire]\n"
            f"    lock_keep_alive_ms: {keep_alive}\n    lock_acquire_sleep_ms: {sleep}\n"
        )
        with env_up(topo, tmp_path / label) as env:
            be = env.backend
            assert isinstance(be, LocalBackend)
            times = []
            rng = random.Random(7)
            for _ in range(3):
                time.sleep(rng.uniform(0, sleep / 1000))  # a random phase of the slave's lock polling
                master = be.master("p")
                assert master is not None
                t0 = time.monotonic()
                be.kill(master)
                new = be.wait_master("p", 40)
                times.append(time.monotonic() - t0)
                assert new != master
                be.start_broker(master)
            results[label] = times
            ready += [s for _, state, s in be.ready_log if state == "master"]
    FIGURES["takeover"] = {k: [round(t, 2) for t in v] for k, v in results.items()}
    FIGURES["takeover_median"] = {k: round(statistics.median(v), 2) for k, v in results.items()}
    FIGURES["start_to_ready_master_median_s"] = round(statistics.median(ready), 2)
    print(f"\ntakeover figures: {FIGURES}")
    # Default: the slave polls the lock every 10 s; tuned: every 1 s, then waits one 2 s keep-alive.
    assert max(results["default"]) < 10 + 8, results
    assert max(results["tuned"]) < 1 + 2 + 6, results


def test_trio_takeover(tmp_path: Path) -> None:
    topo = loads_topology("name: trio\ngroups:\n  - {name: t, kind: trio, connectors: [openwire]}\n")
    with env_up(topo, tmp_path / "run") as env:
        be = env.backend
        assert be.states() == {"t-1": "master", "t-2": "slave", "t-3": "slave"}  # type: ignore[attr-defined]
        be.kill("t-1")
        new = be.wait_master("t", 30)
        assert new in ("t-2", "t-3")
        other = "t-3" if new == "t-2" else "t-2"
        assert be.state(other) == "slave"  # type: ignore[attr-defined]
        be.kill(new)
        assert be.wait_master("t", 30) == other


def test_user_xml_fragment_and_whole_file_run(tmp_path: Path) -> None:
    """What the model cannot express: a fragment and a whole activemq.xml template, both accepted
    by ActiveMQ (a schema-invalid fragment is shown in test_broker_dying_at_start...)."""
    (tmp_path / "whole.xml").write_text(
        """<beans xmlns="http://www.springframework.org/schema/beans"
       xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
       xsi:schemaLocation="http://www.springframework.org/schema/beans
         http://www.springframework.org/schema/beans/spring-beans.xsd
         http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="{{ broker.name }}" useJmx="false"
          dataDirectory="{{ broker.data_dir }}">
    <persistenceAdapter><kahaDB directory="{{ broker.store_dir }}"/></persistenceAdapter>
    <transportConnectors>
{%- for c in connectors %}
      <transportConnector name="{{ c.name }}" uri="{{ c.uri }}"/>
{%- endfor %}
    </transportConnectors>
  </broker>
</beans>
"""
    )
    topo_file = tmp_path / "custom.yaml"
    topo_file.write_text(
        """name: custom
groups:
  - name: f
    kind: standalone
    connectors: [stomp, openwire]
    xml_fragment: |
      <destinationPolicy>
        <policyMap><policyEntries>
          <policyEntry queue=">" prioritizedMessages="true"/>
        </policyEntries></policyMap>
      </destinationPolicy>
  - name: w
    kind: standalone
    connectors: [stomp, openwire]
    xml_file: whole.xml
"""
    )
    from harness.topology import load_topology

    with env_up(load_topology(topo_file), tmp_path / "run") as env:
        assert env.backend.states() == {"f-1": "master", "w-1": "master"}  # type: ignore[attr-defined]
        conf = (env.plan.brokers["f-1"].conf_dir / "activemq.xml").read_text()
        assert "prioritizedMessages" in conf
        _round_trip(env, "f", "/queue/frag")
        _round_trip(env, "w", "/queue/whole")


def test_topologies_side_by_side(tmp_path: Path) -> None:
    envs: dict[str, Environment] = {}
    errors: list[BaseException] = []
    gate = threading.Event()

    def run(label: str) -> None:
        try:
            with env_up(builtin_topology("pair-stomp"), tmp_path / label) as env:
                envs[label] = env
                _round_trip(env, "pair", f"/queue/{label}")
                gate.wait(60)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(f"side{i}",)) for i in range(2)]
    for th in threads:
        th.start()
    deadline = time.monotonic() + 120
    while len(envs) < 2 and not errors and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        assert not errors, errors
        assert len(envs) == 2
        ports = [
            set(b.ports.values()) | {lk.listen_port for lk in e.plan.links}
            for e in envs.values()
            for b in [*e.plan.brokers.values()]
        ]
        a = ports[0] | ports[1]
        b = ports[2] | ports[3]
        assert not a & b, "two runs were given the same port"
        for e in envs.values():
            assert e.backend.master("pair") == "pair-1"
    finally:
        gate.set()
        for th in threads:
            th.join(60)
    assert not errors, errors


# -- clear errors, nothing half-started ------------------------------------------------------------


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True) if p.is_running()}


def _standalone(extra: str = "") -> str:
    return f"name: err\ngroups:\n  - name: s\n    kind: standalone\n    connectors: [openwire]\n{extra}"


def test_java_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    be = LocalBackend(make_plan(loads_topology(_standalone()), tmp_path / "run"), tmp_path / "run")
    with pytest.raises(
        BackendError, match=r"Java not found: install openjdk-17-jre-headless .* or set JAVA_HOME"
    ):
        be.start()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    with pytest.raises(BackendError, match=r"Java not found \(JAVA_HOME=.*jdk has no bin/java\)"):
        be.preflight()
    assert not be.alive("s-1")


def test_activemq_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTIVEMQ_HOME", str(tmp_path / "no-activemq"))
    be = LocalBackend(make_plan(loads_topology(_standalone()), tmp_path / "run"), tmp_path / "run")
    with pytest.raises(
        BackendError,
        match=r"ActiveMQ not found: .*no-activemq/bin/activemq.jar is missing.*"
        r"ACTIVEMQ_HOME",
    ):
        be.start()


def test_port_in_use(tmp_path: Path) -> None:
    port = free_ports(1)[0]
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", port))
        blocker.listen()
        topo = loads_topology(
            _standalone().replace("connectors: [openwire]", f"connectors:\n      openwire: {{port: {port}}}")
        )
        be = LocalBackend(make_plan(topo, tmp_path / "run"), tmp_path / "run")
        with pytest.raises(BackendError, match=rf"port {port} \(s-1 openwire\) is already in use.*unpin it"):
            be.start()
        assert not be.alive("s-1")


def test_unwritable_data_dir(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    run = blocker / "run"
    be = LocalBackend(make_plan(loads_topology(_standalone()), run), run)
    with pytest.raises(BackendError, match=r"broker data folder .*a-file/run/brokers is not writable"):
        be.start()


def test_broker_dying_at_start_leaves_nothing(tmp_path: Path) -> None:
    """Group b's broker fails on its configuration while a's is already up: the error names b-1
    and shows its log's diagnosis; a's broker and the fault proxy are stopped too."""
    text = (
        "name: dies\ngroups:\n  - {name: a, kind: standalone, connectors: [openwire]}\n"
        "  - name: b\n    kind: standalone\n    connectors: [openwire]\n    xml_fragment: |\n"
        "      <systemUsage><systemUsage><memoryUsage><bogus/></memoryUsage></systemUsage></systemUsage>\n"
    )
    before = _children()
    with pytest.raises(BackendError) as ei, Environment.up(loads_topology(text), tmp_path / "run"):
        pytest.fail("the environment should not come up")
    msg = str(ei.value)
    assert "broker b-1 died at start" in msg or "broker b-1 failed at start" in msg, msg
    assert "bogus" in msg and "Invalid content" in msg, msg  # the root cause from the broker log
    time.sleep(0.5)
    left = _children() - before
    assert not left, f"processes left behind: {[psutil.Process(p).cmdline()[:3] for p in left]}"
    assert not list((tmp_path / "run" / "pids").glob("*.json"))


# -- no orphans ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=["kill-9", "term", "int"]
)
def test_no_orphans_when_the_harness_dies(tmp_path: Path, sig: signal.Signals) -> None:
    run_dir = tmp_path / "run"
    child = subprocess.Popen(
        [sys.executable, str(HERE / "_child_harness.py"), "pair-stomp", str(run_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line, f"child harness failed: {child.stderr.read() if child.stderr else ''}"
        pids = {k: v for k, v in json.loads(line).items() if v}
        assert len(pids) == 3, pids  # two brokers and the fault proxy
        assert all(psutil.pid_exists(p) for p in pids.values())
        os.kill(child.pid, sig)
        child.wait(30)
        deadline = time.monotonic() + 5
        alive = dict(pids)
        while alive and time.monotonic() < deadline:
            alive = {
                k: p
                for k, p in alive.items()
                if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
            }
            time.sleep(0.1)
        assert not alive, f"orphans after {sig.name} of the harness: {alive}"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def _detached(cmd: list[str]) -> int:
    """Start `cmd` as a process that is not our child (reparented, its own session/group), like a
    process a crashed harness left behind; return its pid."""
    out = subprocess.run(
        ["sh", "-c", 'setsid "$@" >/dev/null 2>&1 </dev/null & echo $!', "sh", *cmd],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.strip())


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_stale_run_is_cleaned_safely(tmp_path: Path) -> None:
    """A crashed harness left a broker holding the store lock, and a pid file that now names an
    unrelated process; a sibling run of a live harness is running too. A new start in the crashed
    run's folder reaps only the crashed run's own broker, and starts cleanly."""
    run = tmp_path / "run"
    plan = make_plan(builtin_topology("pair-stomp"), run)
    old = LocalBackend(plan, run)
    old.preflight()
    for b in plan.brokers.values():
        prepare_broker(plan, b)
    dead_owner = subprocess.Popen(["true"])
    dead_owner.wait()
    (run / "brokers" / "owner.json").write_text(
        json.dumps({"pid": dead_owner.pid, "created": 0.0, "closed": False})
    )
    cmd = old._command(plan.brokers["pair-1"])
    survivor = _detached(cmd)
    decoy = _detached(["sleep", "300"])
    live_sibling = _detached(["sleep", "301"])
    try:
        pids = run / "pids"
        pids.mkdir(exist_ok=True)
        (pids / f"pair-1.{survivor}.json").write_text(
            json.dumps({"pid": survivor, "name": "pair-1", "cmd": cmd})
        )
        # The pid file says a broker, but the process with that pid is something else now.
        (pids / f"pair-2.{decoy}.json").write_text(
            json.dumps({"pid": decoy, "name": "pair-2", "cmd": ["java", "-jar", "activemq.jar"]})
        )
        sibling = tmp_path / "sibling"
        (sibling / "pids").mkdir(parents=True)
        (sibling / "brokers").mkdir()
        me = psutil.Process()
        (sibling / "brokers" / "owner.json").write_text(
            json.dumps({"pid": me.pid, "created": me.create_time()})
        )
        (sibling / "pids" / f"x.{live_sibling}.json").write_text(
            json.dumps({"pid": live_sibling, "name": "x", "cmd": ["sleep", "301"]})
        )
        port = plan.brokers["pair-1"].ports["openwire"]
        deadline = time.monotonic() + 60
        while port not in _listening() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert port in _listening(), "the leftover broker never served"
        assert psutil.Process(survivor).ppid() != os.getpid()

        be = LocalBackend(plan, run)
        try:
            be.start()
            assert _gone(survivor), "the stale broker was not reaped"
            assert not _gone(decoy), "an unrelated process with a recycled pid was killed"
            assert not _gone(live_sibling), "a live run's process was killed"
            assert be.states() == {"pair-1": "master", "pair-2": "slave"}
            stale = list(run.glob("brokers.stale-*"))
            assert len(stale) == 1 and (stale[0] / "pair-1" / "conf" / "activemq.xml").exists()
            owner = json.loads((run / "brokers" / "owner.json").read_text())
            assert owner["pid"] == os.getpid() and owner["closed"] is False
        finally:
            be.close()
        assert json.loads((run / "brokers" / "owner.json").read_text())["closed"] is True
    finally:
        for p in (survivor, decoy, live_sibling):
            if not _gone(p):
                os.kill(p, signal.SIGKILL)


def _listening() -> set[int]:
    from harness.backends.local import listening_ports

    return listening_ports() or set()
