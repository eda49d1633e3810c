"""Brokers as Docker containers (Docker SDK), everything else as with the local backend.

The plan, the broker configs (brokerconf), the fault proxy and the agents stay exactly as for the
local backend: only the JVMs move into containers of the ActiveMQ image (`bfh images build`, or
`ACTIVEMQ_IMAGE`). Each broker container joins a per-run bridge network and publishes its
connector ports on 127.0.0.1 at the ports the plan allocated, so the proxy's upstreams are
unchanged. The run folder is bind-mounted at its own path (configs and logs stay where the local
backend has them, so log-based state detection is shared); a group's KahaDB store is a named
volume shared by its members, whose file lock decides the master across containers.

Everything created carries the label `org.bfh.run=<run id>`; `close()` and `clean_run()` remove
the containers, networks and volumes of that run only (no reaper image can be pulled here).
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import threading
import time
from pathlib import Path
from typing import Any

from harness.backends.base import BackendError
from harness.backends.local import LocalBackend, listening_ports
from harness.brokerconf import for_container
from harness.images import ImageError, docker_client
from harness.plan import HOST, BrokerPlan, Plan

RUN_LABEL = "org.bfh.run"
ROLE_LABEL = "org.bfh.role"
HOST_ALIAS = "host.docker.internal"


def _client() -> Any:
    try:
        return docker_client(timeout=120)
    except ImageError as e:
        raise BackendError(str(e)) from None


def _netns_listening(pid: int) -> set[int] | None:
    """Ports in LISTEN state in the network namespace of `pid` (a container's init process)."""
    return listening_ports(netns_pid=pid)


class GatewayRelay:
    """Plain TCP relays from the run network's gateway address to the fault proxy's bridge links.

    The proxy listens on 127.0.0.1, which a container cannot reach; a bridge from a broker
    container dials `host.docker.internal` (the run network's gateway), and this relay hands the
    bytes to the proxy link unchanged, so the link's faults still apply to broker<->broker traffic.
    """

    def __init__(self, gateway: str, ports: list[int]) -> None:
        self.gateway = gateway
        self.ports = ports
        self._servers: dict[int, socket.socket] = {}
        self._stop = threading.Event()
        self._sync()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            self._sync()

    def _sync(self) -> None:
        """Listen exactly while the proxy link listens: a bridge dialing a refusing link must be
        refused too (an accept-then-close would look like a connected, then dropped, bridge)."""
        from harness.backends.local import listening_ports

        up = listening_ports() or set()
        for port in self.ports:
            srv = self._servers.get(port)
            if port in up and srv is None:
                srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    srv.bind((self.gateway, port))
                except OSError:
                    srv.close()
                    continue
                srv.listen(16)
                srv.settimeout(0.5)
                self._servers[port] = srv
                threading.Thread(target=self._accept, args=(srv, port), daemon=True).start()
            elif port not in up and srv is not None:
                self._servers.pop(port).close()

    def _accept(self, srv: socket.socket, port: int) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                up = socket.create_connection((HOST, port), timeout=5)
            except OSError:
                conn.close()  # the proxy link refuses (its broker does not listen): so do we
                continue
            for a, b in ((conn, up), (up, conn)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        src.settimeout(None)
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def close(self) -> None:
        self._stop.set()
        for srv in self._servers.values():
            srv.close()
        self._servers.clear()


def clean_run(run_id: str) -> dict[str, int]:
    """Remove every container, network and volume labelled with `run_id` (idempotent)."""
    client = _client()
    flt = {"label": f"{RUN_LABEL}={run_id}"}
    removed = {"containers": 0, "networks": 0, "volumes": 0}
    for c in client.containers.list(all=True, filters=flt):
        with contextlib.suppress(Exception):
            c.remove(force=True, v=True)
            removed["containers"] += 1
    for n in client.networks.list(filters=flt):
        with contextlib.suppress(Exception):
            n.remove()
            removed["networks"] += 1
    for v in client.volumes.list(filters=flt):
        with contextlib.suppress(Exception):
            v.remove(force=True)
            removed["volumes"] += 1
    return removed


def leftovers(run_id: str) -> list[str]:
    """Names of what still carries `run_id`'s label (for tests and `close()` checks)."""
    client = _client()
    flt = {"label": f"{RUN_LABEL}={run_id}"}
    names = [f"container {c.name}" for c in client.containers.list(all=True, filters=flt)]
    names += [f"network {n.name}" for n in client.networks.list(filters=flt)]
    names += [f"volume {v.name}" for v in client.volumes.list(filters=flt)]
    return names


class DockerBackend(LocalBackend):
    def __init__(self, plan: Plan, run_dir: str | Path, heap_mb: int = 256, image: str | None = None) -> None:
        super().__init__(plan, run_dir, heap_mb)
        from harness import images

        self.image = image or images.activemq_image()
        # The run folder's name is the run id everywhere else (reports/<run-id>/).
        # the folder name plus a hash of its path: stable across processes (interrupted runs)
        digest = hashlib.sha256(str(self.run_dir).encode()).hexdigest()[:8]
        self.run_id = f"{self.run_dir.name}-{digest}".lower()
        self.client: Any = None
        self.network: Any = None
        self._containers: dict[str, Any] = {}
        self._pids: dict[str, int] = {}
        self._isolated: set[str] = set()
        self.gateway: str | None = None
        self._relay: GatewayRelay | None = None

    @property
    def labels(self) -> dict[str, str]:
        return {RUN_LABEL: self.run_id}

    def _name(self, what: str) -> str:
        return f"bfh-{self.run_id}-{what}"

    # -- preparation -------------------------------------------------------------------------
    def preflight(self) -> None:
        import docker.errors

        self.client = self.client or _client()
        try:
            self.client.images.get(self.image)
        except docker.errors.ImageNotFound:
            raise BackendError(
                f"image {self.image} not found: run `bfh images build` (or set ACTIVEMQ_IMAGE)"
            ) from None
        self._check_writable()
        if self.network is None:
            clean_run(self.run_id)  # leftovers of an interrupted run in this same folder

    def _prepare(self, b: BrokerPlan) -> None:
        super()._prepare(b)
        # Inside its container a broker must listen on all interfaces (published ports arrive on
        # the container's bridge address), and bridges must reach the host's fault proxy.
        xml = b.conf_dir / "activemq.xml"
        xml.write_text(for_container(xml.read_text(encoding="utf-8"), HOST_ALIAS), encoding="utf-8")

    def _ensure_network(self) -> None:
        if self.network is None:
            self.network = self.client.networks.create(self._name("net"), driver="bridge", labels=self.labels)
            self.network.reload()
            self.gateway = self.network.attrs["IPAM"]["Config"][0]["Gateway"]
            bridge_ports = [lk.listen_port for lk in self.plan.links if lk.kind == "bridge"]
            if bridge_ports:
                self._relay = GatewayRelay(str(self.gateway), bridge_ports)
        for group in {b.group for b in self.plan.brokers.values()}:
            name = self._name(f"{group}-store")
            if not self.client.volumes.list(filters={"name": name, "label": f"{RUN_LABEL}={self.run_id}"}):
                self.client.volumes.create(name, labels=self.labels)

    def start(self) -> None:
        self.preflight()
        try:
            self._ensure_network()
        except Exception as e:
            self.close()
            raise BackendError(f"cannot create the run's Docker network/volumes: {e}") from None
        self._attach_recorded_proxy()
        super().start()

    def _command(self, b: BrokerPlan) -> list[str]:
        cmd = super()._command(b)
        cmd[0] = "java"  # the image's Java, not the host's
        cmd = [c.replace(str(self.home), "/usr/share/activemq") for c in cmd]
        return cmd

    def _spawn(self, b: BrokerPlan) -> None:
        b.log_file.touch()
        self._log_offset[b.name] = b.log_file.stat().st_size
        self._paused.discard(b.name)
        self._isolated.discard(b.name)
        self._started[b.name] = time.monotonic()
        self._remove_container(b.name)
        mounts = {
            str(self.run_dir): {"bind": str(self.run_dir), "mode": "rw"},
            self._name(f"{b.group}-store"): {"bind": str(b.store_dir), "mode": "rw"},
        }
        try:
            c = self.client.containers.run(
                self.image,
                self._command(b),
                name=self._name(b.name),
                detach=True,
                labels={**self.labels, ROLE_LABEL: "broker", "org.bfh.broker": b.name},
                network=self.network.name,
                hostname=b.name,
                ports={f"{p}/tcp": (HOST, p) for p in b.ports.values()},
                volumes=mounts,
                working_dir=str(b.base_dir),
                extra_hosts={HOST_ALIAS: str(self.gateway)},
                stdout=True,
                stderr=True,
            )
        except Exception as e:
            raise BackendError(f"broker {b.name}: container did not start: {e}") from None
        c.reload()
        self._containers[b.name] = c
        self._pids[b.name] = int(c.attrs["State"]["Pid"])

    def _remove_container(self, name: str) -> None:
        c = self._containers.pop(name, None)
        self._pids.pop(name, None)
        if c is not None:
            with contextlib.suppress(Exception):
                c.remove(force=True)

    # -- state ----------------------------------------------------------------------------------
    def listening_ports(self) -> set[int] | None:
        """Ports our brokers listen on inside their containers (the mirror's view); a paused or
        isolated broker counts as not listening (clients cannot reach it)."""
        ports: set[int] = set()
        for name, pid in list(self._pids.items()):
            if name in self._paused or name in self._isolated:
                continue
            got = _netns_listening(pid)
            if got:
                ports |= got & set(self.plan.brokers[name].ports.values())
        return ports

    def _listening_in(self, name: str, port: int) -> bool:
        pid = self._pids.get(name)
        if pid is None:
            return False
        got = _netns_listening(pid)
        return got is not None and port in got

    def alive(self, broker: str) -> bool:
        pid = self._pids.get(broker)
        if pid is None:
            return False
        # The container's init is the JVM: its /proc entry is gone once it died (no docker call).
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z"

    def _serving(self, broker: str) -> bool:
        return self._listening_in(broker, self.plan.brokers[broker].ports["openwire"])

    def _wait_state(self, name: str, want_master: bool, timeout: float = 90.0) -> str:
        from harness.backends import local

        b = self.plan.brokers[name]
        deadline = time.monotonic() + timeout
        while True:
            log = self._new_log(name)
            if not self.alive(name):
                raise BackendError(f"broker {name} died at start; log tail:\n" + self._tail(name))
            fatal = local.FATAL.search(log)
            if fatal:
                self._remove_container(name)
                raise BackendError(
                    f"broker {name} failed at start ({fatal.group(0)}); log tail:\n" + self._tail(name)
                )
            if local.STARTED.search(log) and self._listening_in(name, b.ports["openwire"]):
                self._ready(name, "master")
                self._sync_links()
                return "master"
            if not want_master and local.SLAVE.search(log):
                self._ready(name, "slave")
                return "slave"
            if time.monotonic() > deadline:
                raise BackendError(
                    f"broker {name} not ready after {timeout:.0f}s; log tail:\n" + self._tail(name)
                )
            time.sleep(0.05)

    def _tail(self, name: str, lines: int = 15) -> str:
        text = super()._tail(name, lines)
        c = self._containers.get(name)
        if c is not None:
            with contextlib.suppress(Exception):
                text += "--- container output\n" + c.logs(tail=lines).decode(errors="replace")
        return text

    def attach_proxy(self, proxy: object) -> None:
        if self.mirror is None:
            from harness.backends.linkmirror import LinkMirror

            self.mirror = LinkMirror(self.plan, proxy, self.listening_ports)
            self.mirror.start()

    # -- faults --------------------------------------------------------------------------------
    def _container(self, name: str) -> Any:
        if name not in self.plan.brokers:
            raise BackendError(f"unknown broker {name!r}; brokers: {', '.join(self.plan.brokers)}")
        c = self._containers.get(name)
        if c is None or not self.alive(name):
            raise BackendError(f"broker {name} is not running")
        return c

    def kill(self, broker: str) -> None:
        c = self._container(broker)
        if broker in self._paused:
            with contextlib.suppress(Exception):
                c.unpause()  # a frozen cgroup would hold the SIGKILL until thawed
        c.kill(signal="SIGKILL")
        self._wait_dead(broker)
        self._remove_container(broker)
        self._paused.discard(broker)
        self._sync_links()

    def _wait_dead(self, broker: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self.alive(broker) and time.monotonic() < deadline:
            time.sleep(0.02)

    def stop(self, broker: str) -> None:
        c = self._container(broker)
        c.stop(timeout=30)
        self._wait_dead(broker)
        self._remove_container(broker)
        self._paused.discard(broker)
        self._sync_links()

    def pause(self, broker: str) -> None:
        self._container(broker).pause()
        self._paused.add(broker)
        self._sync_links()

    def resume(self, broker: str) -> None:
        self._container(broker).unpause()
        self._paused.discard(broker)
        self._sync_links()

    def isolate(self, broker: str) -> None:
        """Disconnect the broker from the run network: a real partition (clients and bridges)."""
        c = self._container(broker)
        if broker in self._isolated:
            return
        self.network.disconnect(c, force=True)
        self._isolated.add(broker)
        self._sync_links()

    def reconnect(self, broker: str) -> None:
        if broker not in self._isolated:
            return
        if not self.alive(broker):  # killed while cut off: its next start joins the network afresh
            self._isolated.discard(broker)
            return
        self.network.connect(self._container(broker))
        self._isolated.discard(broker)
        self._sync_links()

    def pid(self, broker: str) -> int | None:
        return self._pids.get(broker) if self.alive(broker) else None

    # -- teardown -------------------------------------------------------------------------------
    def close(self) -> None:
        if self.mirror is not None:
            self.mirror.stop()
            self.mirror = None
        self._paused.clear()
        self._isolated.clear()
        self._containers.clear()
        self._pids.clear()
        self.network = None
        if self._relay is not None:
            self._relay.close()
            self._relay = None
        with contextlib.suppress(BackendError):
            clean_run(self.run_id)
        if (self.run_dir / "brokers" / "owner.json").exists():
            self._write_owner(closed=True)
