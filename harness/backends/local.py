"""Brokers as local Java processes (the embedded default).

Uses Debian's ActiveMQ (/usr/share/activemq) or `ACTIVEMQ_HOME`. Every JVM goes through
`harness.procs`, so none outlives the harness: PR_SET_PDEATHSIG kills it when the harness dies
(even by kill -9), it leads its own process group, and its pid file lets a later harness reap it.

Run folder (`<run>/brokers/`): one folder per broker (conf/, data/, lib/, broker.log,
stdout.log), `<group>-store/kahadb` shared by a group's members, and `owner.json` naming the
harness process that owns the run. A later start in the same folder whose owner is gone reaps
what is left (only processes whose command line is the recorded one, `procs.reap_stale`) and
moves the stale `brokers/` aside to `brokers.stale-<time>/`; sibling runs are reaped by
`Environment.up` (`procs.reap_stale_runs`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

from harness import procs
from harness.backends.base import BackendError, ProxyLinks
from harness.backends.brokerfiles import (
    EXTRA_JARS,
    JAVA_LIBS,
    BrokerLogs,
    activemq_command,
    activemq_home,
    check_writable,
    java_bin,
    java_version,
    listening,
    listening_ports,
    port_bound,
    prepare_broker,
    prepare_tls,
)
from harness.backends.groupstate import GroupState
from harness.backends.linkmirror import LinkMirror
from harness.backends.ready import START_TIMEOUT, BrokerReady, BrokerView
from harness.deploy.plan import BrokerPlan, Plan, release_ports

# Re-exported: older callers import these from here.
__all__ = ["LocalBackend", "activemq_command", "clean_stale_run", "listening_ports", "owner_alive"]


# -- stale runs ----------------------------------------------------------------------------------


def write_owner(run_dir: Path, closed: bool) -> None:
    """`brokers/owner.json`: this harness owns the run (until `closed`)."""
    d = Path(run_dir) / "brokers"
    d.mkdir(parents=True, exist_ok=True)
    (d / "owner.json").write_text(json.dumps({**procs.owner_record(), "closed": closed}))


def owner_alive(run_dir: Path) -> bool | None:
    """True/False whether the harness that owns `run_dir` lives; None when no owner is recorded
    or the run was closed cleanly (nothing can be stale then)."""
    f = Path(run_dir) / "brokers" / "owner.json"
    try:
        rec = json.loads(f.read_text())
    except (OSError, ValueError):
        return None
    if rec.get("closed") or rec.get("reaped"):
        return None
    return procs.alive(rec.get("pid"), rec.get("created", 0.0), rec.get("host"))


def clean_stale_run(run_dir: Path, move_aside: bool = False) -> list[int]:
    """Reap a run folder whose owner died without closing it: its recorded processes are killed.

    Safe by construction: nothing happens unless the run's recorded owner process is gone (and
    did not close the run), and only processes whose command line matches their pid file are
    signalled. `move_aside` (for a new start in the same folder) also moves the stale `brokers/`
    to `brokers.stale-<time>/`, keeping its logs for the post-mortem.
    """
    run_dir = Path(run_dir)
    if owner_alive(run_dir) is not False:
        return []
    killed = procs.reap_stale(run_dir / "pids", keep_children_of=os.getpid())
    brokers = run_dir / "brokers"
    owner = brokers / "owner.json"
    try:
        rec = json.loads(owner.read_text())
        rec["reaped"] = {"by": os.getpid(), "at": time.time(), "killed": killed}
        owner.write_text(json.dumps(rec))
    except (OSError, ValueError):
        pass
    if move_aside and brokers.is_dir():
        brokers.rename(run_dir / f"brokers.stale-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    return killed


# -- the backend ---------------------------------------------------------------------------------


class LocalBackend(GroupState):
    def __init__(self, plan: Plan, run_dir: str | Path, heap_mb: int = 256) -> None:
        self.plan = plan
        self.run_dir = Path(run_dir).resolve()
        self.heap_mb = heap_mb
        self.home = activemq_home()
        self.logs = BrokerLogs(plan)
        self._procs: dict[str, procs.ManagedProcess] = {}
        self._paused: set[str] = set()
        self._started: dict[str, float] = {}
        self.mirror: LinkMirror | None = None
        # every start: (broker, "master" or "slave", seconds from spawn to serving / waiting for lock)
        self.ready_log: list[tuple[str, str, float]] = []

    # -- preparation -------------------------------------------------------------------------
    def preflight(self) -> None:
        """Check everything that can be checked before anything starts (clean stale leftovers)."""
        java_version(java_bin())
        jar = self.home / "bin" / "activemq.jar"
        if not jar.is_file():
            raise BackendError(
                f"ActiveMQ not found: {jar} is missing; install Debian's activemq "
                "(make setup does) or set ACTIVEMQ_HOME to an ActiveMQ 5.x install"
            )
        uses_mqtt = any("mqtt" in b.ports for b in self.plan.brokers.values())
        if uses_mqtt and not self._has_mqtt_jars():
            missing = [j for j in EXTRA_JARS if not (JAVA_LIBS / j).exists()]
            raise BackendError(
                f"MQTT connector needs {', '.join(missing)}: install libmqtt-client-java "
                "and libhawtdispatch-java (make setup does)"
            )
        check_writable(self.plan, self.run_dir)
        self._clean_stale()
        for b in self.plan.brokers.values():
            if self.alive(b.name):
                continue
            for c, port in b.ports.items():
                if port_bound(port):
                    raise BackendError(
                        f"port {port} ({b.name} {c}) is already in use by another process; "
                        "unpin it in the topology (ports are then allocated) or free it"
                    )

    def _clean_stale(self) -> None:
        """Leftovers of a crashed harness in this run folder are reaped."""
        if self._procs:
            return  # we are running here: nothing is stale
        if owner_alive(self.run_dir) is False:
            clean_stale_run(self.run_dir, move_aside=True)
        else:
            # Brokers recorded in pids/ that are not children of this process are leftovers of an
            # earlier start in this folder (a closed run leaves no pid files behind).
            names = tuple(f"{b}." for b in self.plan.brokers)
            pid_dir = self.run_dir / "pids"
            if pid_dir.is_dir() and any(f.name.startswith(names) for f in pid_dir.glob("*.json")):
                stale = self.run_dir / "pids.stale"
                stale.mkdir(exist_ok=True)
                for f in pid_dir.glob("*.json"):
                    if f.name.startswith(names):
                        f.rename(stale / f.name)
                procs.reap_stale(stale, keep_children_of=os.getpid())
                shutil.rmtree(stale, ignore_errors=True)
        write_owner(self.run_dir, closed=False)

    def _has_mqtt_jars(self) -> bool:
        if any((self.home / "lib").glob("mqtt-client*.jar")):
            return True
        return all((JAVA_LIBS / j).exists() for j in EXTRA_JARS)

    def _command(self, b: BrokerPlan) -> list[str]:
        return activemq_command(java_bin(), self.home, b.conf_dir, b.base_dir, b.data_dir, self.heap_mb)

    # -- lifecycle -----------------------------------------------------------------------------
    def attach_proxy(self, proxy: ProxyLinks) -> None:
        """Mirror broker listening state onto the fault proxy's links (see linkmirror.py).

        The environment calls this once the proxy holds the plan's links, before `start`; the
        mirror runs until `close()`.
        """
        if self.mirror is None:
            self.mirror = LinkMirror(self.plan, proxy, listening_ports)
            self.mirror.start()

    def start(self) -> None:
        self.preflight()
        try:
            prepare_tls(self.plan, self.run_dir)
            for b in self.plan.brokers.values():
                prepare_broker(self.plan, b)
            # Member 1 of every group first, so it takes the lock and becomes master.
            firsts = [b for b in self.plan.brokers.values() if b.index == 1]
            for b in firsts:
                self._spawn(b)
            for b in firsts:
                self._wait_ready(b.name, want_master=True)
            others = [b for b in self.plan.brokers.values() if b.index > 1]
            for b in others:
                self._spawn(b)
            for b in others:
                self._wait_ready(b.name, want_master=False)
        except BaseException:
            self.close()  # nothing half-started
            raise

    def _spawn(self, b: BrokerPlan) -> None:
        self.logs.mark_start(b.name)
        self._paused.discard(b.name)
        self._started[b.name] = time.monotonic()
        self._procs[b.name] = procs.spawn(
            b.name, self._command(b), b.base_dir / "stdout.log", cwd=b.base_dir, pid_dir=self.run_dir / "pids"
        )

    def _wait_ready(self, name: str, want_master: bool, timeout: float = START_TIMEOUT) -> str:
        """Wait until `name` serves ("master") or, unless `want_master`, waits for the lock ("slave")."""
        p = self._procs.get(name)
        view = BrokerView(
            broker=self.plan.brokers[name],
            alive=lambda: p is not None and p.alive(),
            log=lambda: self.logs.since_start(name),
            serving=lambda: self._serving(name),
            tail=lambda: self.logs.tail(name),
            exit_code=lambda: p.popen.returncode if p is not None else "?",
        )
        state = BrokerReady(want_master, timeout).wait(view)
        self.ready_log.append((name, state, time.monotonic() - self._started[name]))
        self._sync_links()
        return state

    def close(self) -> None:
        if self.mirror is not None:
            self.mirror.stop()
            self.mirror = None
        for name in list(self._procs):
            self._procs.pop(name).kill()
        self._paused.clear()
        if (self.run_dir / "brokers" / "owner.json").exists():
            write_owner(self.run_dir, closed=True)
            # The run is over: its ports may be handed out again (the proxy stops right after).
            ports = [p for b in self.plan.brokers.values() for p in b.ports.values()]
            ports += [b.witness_port for b in self.plan.brokers.values() if b.witness_port]
            release_ports(ports + [lk.listen_port for lk in self.plan.links])

    # -- faults --------------------------------------------------------------------------------
    def _proc(self, name: str) -> procs.ManagedProcess:
        if name not in self.plan.brokers:
            raise BackendError(f"unknown broker {name!r}; brokers: {', '.join(self.plan.brokers)}")
        p = self._procs.get(name)
        if p is None or not p.alive():
            raise BackendError(f"broker {name} is not running")
        return p

    def kill(self, broker: str) -> None:
        self._proc(broker).kill()
        self._procs.pop(broker, None)
        self._paused.discard(broker)
        self._sync_links()

    def stop(self, broker: str) -> None:
        self._proc(broker).terminate(timeout=30)
        self._procs.pop(broker, None)
        self._paused.discard(broker)
        self._sync_links()

    def pause(self, broker: str) -> None:
        self._proc(broker).signal(signal.SIGSTOP)
        self._paused.add(broker)

    def resume(self, broker: str) -> None:
        self._proc(broker).signal(signal.SIGCONT)
        self._paused.discard(broker)

    def start_broker(self, broker: str) -> None:
        """Start a stopped/killed member; returns once it serves or waits for the store lock."""
        if self.alive(broker):
            raise BackendError(f"broker {broker} is already running")
        self._spawn(self.plan.brokers[broker])
        try:
            self._wait_ready(broker, want_master=False)
        except BackendError:
            p = self._procs.pop(broker, None)
            if p is not None:
                p.kill()
            raise

    def restart(self, broker: str) -> None:
        if self.alive(broker):
            self.kill(broker)
        self.start_broker(broker)

    # -- state ---------------------------------------------------------------------------------
    def alive(self, broker: str) -> bool:
        p = self._procs.get(broker)
        return p is not None and p.alive()

    def paused(self, broker: str) -> bool:
        return broker in self._paused

    def pid(self, broker: str) -> int | None:
        p = self._procs.get(broker)
        return p.pid if p is not None and p.alive() else None

    def _serving(self, broker: str) -> bool:
        """Its openwire port is bound (a slave waiting for the store lock binds none)."""
        return listening(self.plan.brokers[broker].ports["openwire"])
