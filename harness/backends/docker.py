"""Brokers and the fault proxy as Docker containers, through testcontainers.

The plan, the broker configs (brokerconf) and the agents stay exactly as for the local backend:
the JVMs run in containers of the ActiveMQ image (`bfh images build`, or `ACTIVEMQ_IMAGE`) and the
fault proxy in one of the fault proxy image. Images are the locally built ones: nothing is ever
pulled (preflight fails with the build command when an image is missing).

- Each broker is a testcontainers `DockerContainer` on the run's testcontainers `Network` (a
  bridge), publishing its connector ports on 127.0.0.1 at the ports the plan allocated; its start
  waits through a testcontainers wait strategy that runs the harness's one readiness rule
  (`ready.BrokerReady`). The run folder is bind-mounted at its own path (configs and logs where
  the local backend has them); a group's KahaDB store is a named volume shared by its members,
  whose file lock decides the master across containers.
- The fault proxy container runs on the host's network namespace, listening on 127.0.0.1 like the
  local proxy process: published ports would go through docker-proxy, which accepts a connection
  before it dials, so a disabled link would no longer refuse (see linkmirror.py).
- Bridges dial `host.docker.internal` (the run network's gateway), where `GatewayRelay` hands the
  bytes to the proxy's bridge links, so link faults apply to broker<->broker traffic.

Everything created carries the label `org.bfh.run=<run id>`; `close()` and `clean_run()` remove
that run's containers, networks and volumes. Ryuk (testcontainers' reaper) needs its image, which
no registry can supply here: it is disabled unless its image is present, and the label-based
cleanup does its job (`TESTCONTAINERS_RYUK_DISABLED=true` says so explicitly).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path
from typing import Any

from testcontainers.core.config import testcontainers_config
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network
from testcontainers.core.waiting_utils import WaitStrategy, WaitStrategyTarget

from harness.backends.base import BackendError, ProxyLinks
from harness.backends.brokerfiles import (
    BrokerLogs,
    activemq_command,
    check_writable,
    listening_ports,
    prepare_broker,
    prepare_tls,
)
from harness.backends.gatewayrelay import GatewayRelay
from harness.backends.groupstate import GroupState
from harness.backends.linkmirror import LinkMirror
from harness.backends.proxycontainer import start_proxy_container
from harness.backends.ready import BrokerReady, BrokerView, wait_until
from harness.deploy import images
from harness.deploy.brokerconf import for_container
from harness.deploy.plan import HOST, BrokerPlan, Plan
from harness.faultproxy.launcher import FaultProxyHandle, start_fault_proxy

RUN_LABEL = "org.bfh.run"
ROLE_LABEL = "org.bfh.role"
HOST_ALIAS = "host.docker.internal"
IMAGE_HOME = Path("/usr/share/activemq")  # Debian's layout, in our image
START_TIMEOUT = 90.0


def _client() -> Any:
    try:
        return images.docker_client(timeout=120)
    except images.ImageError as e:
        raise BackendError(str(e)) from None


def use_local_images_only(client: Any) -> None:
    """Ryuk off unless its image is here (it cannot be pulled); the label cleanup replaces it."""
    import docker.errors

    if testcontainers_config.ryuk_disabled:
        return
    try:
        client.images.get(testcontainers_config.ryuk_image)
    except docker.errors.ImageNotFound:
        testcontainers_config.ryuk_disabled = True


def clean_run(run_id: str, keep_role: str | None = None) -> dict[str, int]:
    """Remove every container, network and volume labelled with `run_id` (idempotent), but the
    containers of `keep_role` (the fault proxy, which its handle stops after the brokers)."""
    client = _client()
    flt = {"label": f"{RUN_LABEL}={run_id}"}
    removed = {"containers": 0, "networks": 0, "volumes": 0}
    for c in client.containers.list(all=True, filters=flt):
        if keep_role is not None and c.labels.get(ROLE_LABEL) == keep_role:
            continue
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


class BrokerStarted(WaitStrategy):
    """A testcontainers wait strategy: the harness's readiness rule for one broker container."""

    def __init__(self, backend: DockerBackend, name: str, want_master: bool) -> None:
        super().__init__()
        self.backend = backend
        self.name = name
        self.ready = BrokerReady(want_master, START_TIMEOUT)
        self.state = ""

    def wait_until_ready(self, container: WaitStrategyTarget) -> None:
        self.state = self.ready.wait(self.backend.view(self.name, container))


class DockerBackend(GroupState):
    def __init__(self, plan: Plan, run_dir: str | Path, heap_mb: int = 256, image: str | None = None) -> None:
        self.plan = plan
        self.run_dir = Path(run_dir).resolve()
        self.heap_mb = heap_mb
        self.image = image or images.activemq_image()
        # the folder name plus a hash of its path: stable across processes (interrupted runs)
        digest = hashlib.sha256(str(self.run_dir).encode()).hexdigest()[:8]
        self.run_id = f"{self.run_dir.name}-{digest}".lower()
        self.logs = BrokerLogs(plan)
        self.client: Any = None
        self.network: Any = None  # testcontainers Network
        self.mirror: LinkMirror | None = None
        self.gateway: str | None = None
        self._relay: GatewayRelay | None = None
        self._containers: dict[str, Any] = {}  # testcontainers DockerContainer per running broker
        self._pids: dict[str, int] = {}
        self._paused: set[str] = set()
        self._isolated: set[str] = set()
        self._started: dict[str, float] = {}
        self._cleaned = False
        self.ready_log: list[tuple[str, str, float]] = []

    @property
    def labels(self) -> dict[str, str]:
        return {RUN_LABEL: self.run_id}

    def _name(self, what: str) -> str:
        return f"bfh-{self.run_id}-{what}"

    # -- preparation -------------------------------------------------------------------------
    def _require_image(self, tag: str, how: str) -> None:
        import docker.errors

        try:
            self.client.images.get(tag)
        except docker.errors.ImageNotFound:
            raise BackendError(f"image {tag} not found: {how} (nothing is pulled)") from None

    def preflight(self) -> None:
        self.client = self.client or _client()
        self._require_image(self.image, "run `bfh images build` (or set ACTIVEMQ_IMAGE)")
        use_local_images_only(self.client)
        check_writable(self.plan, self.run_dir)
        if not self._cleaned:
            clean_run(self.run_id)  # leftovers of an interrupted run in this same folder
            self._cleaned = True  # once: later our own fault proxy carries the run's label

    def fault_proxy(self, run_dir: Path, seed: int | None = None) -> FaultProxyHandle:
        """The run's fault proxy as a container of the fault proxy image (`TOXIPROXY_URL` still
        wins: then that server is used, as with the local backend)."""
        if os.environ.get("TOXIPROXY_URL", "").strip():
            return start_fault_proxy(run_dir, seed)
        self.client = self.client or _client()
        tag = os.environ.get("TOXIPROXY_IMAGE") or images.faultproxy_recipe().tag
        self._require_image(tag, "run `bfh images build faultproxy` (or set TOXIPROXY_IMAGE)")
        use_local_images_only(self.client)
        labels = {**self.labels, ROLE_LABEL: "faultproxy"}
        return start_proxy_container(tag, self._name("faultproxy"), labels, run_dir, seed)

    def _ensure_network(self) -> None:
        if self.network is None:
            net = Network(docker_network_kw={"driver": "bridge", "labels": self.labels})
            net.name = self._name("net")
            self.network = net.create()
            raw = self.client.networks.get(net.id)
            self.gateway = raw.attrs["IPAM"]["Config"][0]["Gateway"]
            bridge_ports = [lk.listen_port for lk in self.plan.links if lk.kind == "bridge"]
            if bridge_ports:
                self._relay = GatewayRelay(str(self.gateway), bridge_ports)
        for group in {b.group for b in self.plan.brokers.values()}:
            name = self._name(f"{group}-store")
            if not self.client.volumes.list(filters={"name": name, "label": f"{RUN_LABEL}={self.run_id}"}):
                self.client.volumes.create(name, labels=self.labels)

    def _prepare(self, b: BrokerPlan) -> None:
        prepare_broker(self.plan, b)
        # Inside its container a broker must listen on all interfaces (published ports arrive on
        # the container's bridge address), and bridges must reach the host's fault proxy.
        xml = b.conf_dir / "activemq.xml"
        xml.write_text(for_container(xml.read_text(encoding="utf-8"), HOST_ALIAS), encoding="utf-8")

    def _command(self, b: BrokerPlan) -> list[str]:
        # the image's Java and ActiveMQ, not the host's
        return activemq_command("java", IMAGE_HOME, b.conf_dir, b.base_dir, b.data_dir, self.heap_mb)

    # -- lifecycle -----------------------------------------------------------------------------
    def attach_proxy(self, proxy: ProxyLinks) -> None:
        if self.mirror is None:
            self.mirror = LinkMirror(self.plan, proxy, self.listening_ports)
            self.mirror.start()

    def start(self) -> None:
        self.preflight()
        try:
            self._ensure_network()
        except Exception as e:
            self.close()
            raise BackendError(f"cannot create the run's Docker network/volumes: {e}") from None
        try:
            prepare_tls(self.plan, self.run_dir)
            for b in self.plan.brokers.values():
                self._prepare(b)
            # Member 1 of every group first, so it takes the lock and becomes master.
            for b in sorted(self.plan.brokers.values(), key=lambda b: b.index > 1):
                self._spawn(b, want_master=b.index == 1)
        except BaseException:
            self.close()  # nothing half-started
            raise

    def _spawn(self, b: BrokerPlan, want_master: bool) -> str:
        """Start `b`'s container and wait until it serves or waits for the store lock."""
        self.logs.mark_start(b.name)
        self._paused.discard(b.name)
        self._isolated.discard(b.name)
        self._started[b.name] = time.monotonic()
        self._remove_container(b.name)
        waited = BrokerStarted(self, b.name, want_master)
        c = (
            DockerContainer(self.image, name=self._name(b.name))
            .with_command(self._command(b))
            .with_network(self.network)
            .with_network_aliases(b.name)
            .with_volume_mapping(str(self.run_dir), str(self.run_dir), "rw")
            .with_volume_mapping(self._name(b.store_dir.parent.name), str(b.store_dir), "rw")
            .with_kwargs(
                labels={**self.labels, ROLE_LABEL: "broker", "org.bfh.broker": b.name},
                hostname=b.name,
                working_dir=str(b.base_dir),
                extra_hosts={HOST_ALIAS: str(self.gateway)},
            )
            .waiting_for(waited)
        )
        ports: dict[str, Any] = c.ports
        for p in b.ports.values():
            ports[f"{p}/tcp"] = (HOST, p)  # on loopback only, at the plan's port
        self._containers[b.name] = c
        try:
            c.start()
        except BackendError:
            self._remove_container(b.name)
            raise
        except Exception as e:
            self._remove_container(b.name)
            raise BackendError(f"broker {b.name}: container did not start: {e}") from None
        self.ready_log.append((b.name, waited.state, time.monotonic() - self._started[b.name]))
        self._sync_links()
        return waited.state

    def view(self, name: str, container: Any) -> BrokerView:
        """How the readiness rule sees broker `name` in `container` (its init pid is the JVM)."""
        raw = container.get_wrapped_container()
        raw.reload()
        self._pids[name] = int(raw.attrs["State"]["Pid"] or 0)
        return BrokerView(
            broker=self.plan.brokers[name],
            alive=lambda: self.alive(name),
            log=lambda: self.logs.since_start(name),
            serving=lambda: self._serving(name),
            tail=lambda: self._tail(name),
        )

    def _remove_container(self, name: str) -> None:
        c = self._containers.pop(name, None)
        self._pids.pop(name, None)
        if c is not None:
            with contextlib.suppress(Exception):
                c.stop()  # removes it (force), with its anonymous volumes

    def _tail(self, name: str, lines: int = 15) -> str:
        text = self.logs.tail(name, lines)
        c = self._containers.get(name)
        if c is not None:
            with contextlib.suppress(Exception):
                out = c.get_wrapped_container().logs(tail=lines).decode(errors="replace")
                text += "--- container output\n" + out
        return text

    def close(self) -> None:
        if self.mirror is not None:
            self.mirror.stop()
            self.mirror = None
        for name in list(self._containers):
            self._remove_container(name)
        self._paused.clear()
        self._isolated.clear()
        if self.network is not None:
            with contextlib.suppress(Exception):
                self.network.remove()
            self.network = None
        if self._relay is not None:
            self._relay.close()
            self._relay = None
        with contextlib.suppress(BackendError):
            clean_run(self.run_id, keep_role="faultproxy")  # volumes, anything an error left

    # -- state ----------------------------------------------------------------------------------
    def listening_ports(self) -> set[int] | None:
        """Ports our brokers listen on inside their containers (the mirror's view); a paused or
        isolated broker counts as not listening (clients cannot reach it)."""
        ports: set[int] = set()
        for name, pid in list(self._pids.items()):
            if name in self._paused or name in self._isolated:
                continue
            got = listening_ports(netns_pid=pid)
            if got:
                ports |= got & set(self.plan.brokers[name].ports.values())
        return ports

    def _serving(self, broker: str) -> bool:
        pid = self._pids.get(broker)
        if not pid:
            return False
        got = listening_ports(netns_pid=pid)
        return got is not None and self.plan.brokers[broker].ports["openwire"] in got

    def alive(self, broker: str) -> bool:
        pid = self._pids.get(broker)
        if not pid:
            return False
        # The container's init is the JVM: its /proc entry is gone once it died (no docker call).
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z"

    def paused(self, broker: str) -> bool:
        return broker in self._paused

    def pid(self, broker: str) -> int | None:
        return self._pids.get(broker) if self.alive(broker) else None

    # -- faults --------------------------------------------------------------------------------
    def _container(self, name: str) -> Any:
        """The running broker's docker SDK container."""
        if name not in self.plan.brokers:
            raise BackendError(f"unknown broker {name!r}; brokers: {', '.join(self.plan.brokers)}")
        c = self._containers.get(name)
        if c is None or not self.alive(name):
            raise BackendError(f"broker {name} is not running")
        return c.get_wrapped_container()

    def _gone(self, broker: str) -> None:
        wait_until(lambda: True if not self.alive(broker) else None, 30.0, f"broker {broker} gone", 0.02)
        self._remove_container(broker)
        self._paused.discard(broker)
        self._sync_links()

    def kill(self, broker: str) -> None:
        c = self._container(broker)
        if broker in self._paused:
            with contextlib.suppress(Exception):
                c.unpause()  # a frozen cgroup would hold the SIGKILL until thawed
        c.kill(signal="SIGKILL")
        self._gone(broker)

    def stop(self, broker: str) -> None:
        self._container(broker).stop(timeout=30)
        self._gone(broker)

    def pause(self, broker: str) -> None:
        self._container(broker).pause()
        self._paused.add(broker)
        self._sync_links()

    def resume(self, broker: str) -> None:
        self._container(broker).unpause()
        self._paused.discard(broker)
        self._sync_links()

    def start_broker(self, broker: str) -> None:
        """Start a stopped/killed member; returns once it serves or waits for the store lock."""
        if self.alive(broker):
            raise BackendError(f"broker {broker} is already running")
        self._spawn(self.plan.brokers[broker], want_master=False)

    def restart(self, broker: str) -> None:
        if self.alive(broker):
            self.kill(broker)
        self.start_broker(broker)

    def isolate(self, broker: str) -> None:
        """Disconnect the broker from the run network: a real partition (clients and bridges)."""
        c = self._container(broker)
        if broker in self._isolated:
            return
        self.client.networks.get(self.network.id).disconnect(c, force=True)
        self._isolated.add(broker)
        self._sync_links()

    def reconnect(self, broker: str) -> None:
        if broker not in self._isolated:
            return
        if not self.alive(broker):  # killed while cut off: its next start joins the network afresh
            self._isolated.discard(broker)
            return
        self.network.connect(self._container(broker).id, [broker])
        self._isolated.discard(broker)
        self._sync_links()
