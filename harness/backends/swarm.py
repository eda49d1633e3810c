"""Fleet members as a replicated Docker Swarm service; brokers and the fault proxy on the manager.

`--backend swarm` is the local backend (brokers as processes on this host, the manager, and the
fault proxy beside them, so every connection still crosses the proxy) plus one swarm service
whose replicas are the fleet's members (`harness.run.members` hands them over). The service runs
the member image (`bfh images build member`: no registry; a one-node swarm uses the local image,
a node added later needs it loaded: docs/fleet.md) in the host's network, so a member dials the
proxy's links at the addresses of `mb.urls`. The run folder is bind-mounted at its own path:
each member writes agents/<name>/messages.jsonl there, which the run loop follows as it grows.

Each member measures its clock against the manager's time endpoint (`swarmmember.TimeServer`,
UDP) when it starts and when its agent has exited; `close()` records every member's offset in
run.json `clocks` (harness.contracts.msglog.CLOCKS_KEY) and the readers shift its records by it.
Everything made carries the label `org.bfh.run`; `close()` removes the service and waits until
its containers are gone.

Past one machine: `BFH_SWARM_ADDR` names the manager's address the nodes reach. With it, the
proxy's client links listen there and `mb.urls` names it (the plan's `client_host`, from
`harness.backends.client_host`), and so does the time endpoint (`BFH_SWARM_BIND` to bind another,
e.g. 0.0.0.0; `BFH_SWARM_TIME_PORT` to fix its UDP port for a firewall). Without it, 127.0.0.1.
`preflight()` refuses an address that is not this host's before anything starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from harness.backends.base import BackendError
from harness.backends.local import LocalBackend
from harness.backends.swarmmember import TimeServer
from harness.contracts import runrecord
from harness.contracts.msglog import CLOCKS_KEY
from harness.deploy import images
from harness.deploy.plan import HOST, Plan

LABEL = "org.bfh.run"
#: a member's SIGTERM: the agent contract's 10 s flush, then its end-of-run clock probe
STOP_GRACE_S = 20
_DONE = ("complete", "failed", "shutdown", "rejected", "orphaned", "remove")
STATE_TTL_S = 1.0  # one task listing per second serves every member's alive()
ADDR_ENV = "BFH_SWARM_ADDR"  # the manager's address the nodes reach (default: 127.0.0.1, one node)
BIND_ENV = "BFH_SWARM_BIND"  # where the time endpoint binds (default: ADDR_ENV's address)
TIME_PORT_ENV = "BFH_SWARM_TIME_PORT"  # the time endpoint's UDP port (default: any free one)
_ANY = ("0.0.0.0", "")


def advertise_addr() -> str | None:
    """The manager's address the swarm's nodes reach (`BFH_SWARM_ADDR`), or None: loopback."""
    return os.environ.get(ADDR_ENV, "").strip() or None


def host_addresses() -> set[str]:
    """This host's IPv4 addresses (every interface's, loopback's too)."""
    return {
        a.address for addrs in psutil.net_if_addrs().values() for a in addrs if a.family == socket.AF_INET
    }


def check_addresses(plan: Plan) -> None:
    """BackendError unless the addresses the run will listen on are this host's, and the plan's
    client links listen on the advertised one (nothing has started yet)."""
    addr, bind, mine = advertise_addr(), os.environ.get(BIND_ENV, "").strip(), host_addresses()
    if addr is not None and addr not in mine:
        raise BackendError(
            f"{ADDR_ENV}={addr}: not an address of this host ({', '.join(sorted(mine))}); "
            "name the manager's address the swarm's nodes reach (docs/fleet.md, Adding nodes)"
        )
    if bind and bind not in mine and bind not in _ANY:
        raise BackendError(f"{BIND_ENV}={bind}: not an address of this host nor 0.0.0.0")
    port = os.environ.get(TIME_PORT_ENV, "").strip()
    if port and not (port.isdigit() and int(port) < 65536):
        raise BackendError(f"{TIME_PORT_ENV}={port}: not a port number")
    want = addr or HOST
    wrong = sorted({lk.host for lk in plan.links if lk.kind == "client"} - {want})
    if wrong:
        raise BackendError(
            f"the plan's client links listen on {', '.join(wrong)}, not {want}: make the plan with "
            "client_host=harness.backends.client_host('swarm')"
        )


def run_label(run_dir: Path) -> str:
    return Path(run_dir).name


def member_clocks(members: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """run.json `clocks` from the members' clock.json files: the offset is the mean of the start
    and end measurements (either alone when the other is missing, none when both are)."""
    out: dict[str, dict[str, Any]] = {}
    for m in members:
        try:
            c = json.loads((Path(m["dir"]) / "clock.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            out[m["name"]] = {"error": "no clock.json (the member never ran, or its node died first)"}
            continue
        got = [c[k]["offset_s"] for k in ("start", "end") if isinstance(c.get(k), dict)]
        rec = {k: c.get(k) for k in ("host", "slot", "start", "end")}
        if got:
            rec["offset_s"] = sum(got) / len(got)
        out[m["name"]] = rec
    return out


class SwarmBackend(LocalBackend):
    """The local backend's brokers, plus the member service (`SupportsMembers`)."""

    def __init__(self, plan: Plan, run_dir: str | Path, heap_mb: int = 256) -> None:
        super().__init__(plan, run_dir, heap_mb)
        self.client: Any = None
        self.service: Any = None
        self.members: list[dict[str, Any]] = []
        self.time_server: TimeServer | None = None
        self._states: dict[int, tuple[str, str | None, int | None]] = {}
        self._states_at = 0.0
        self._lock = threading.Lock()

    # -- preflight, start, close --------------------------------------------------------------
    def preflight(self) -> None:
        check_addresses(self.plan)
        super().preflight()
        try:
            self.client = images.docker_client(timeout=60)
        except images.ImageError as e:
            raise BackendError(str(e)) from None
        swarm = self.client.info().get("Swarm") or {}
        if swarm.get("LocalNodeState") != "active" or not swarm.get("ControlAvailable"):
            raise BackendError(
                "--backend swarm needs this host to be a swarm manager: "
                "`docker swarm init --advertise-addr 127.0.0.1` (one node; more: docs/fleet.md)"
            )
        if not images.image_exists(self.image):
            raise BackendError(f"member image {self.image} missing: run `bfh images build member`")

    @property
    def image(self) -> str:
        return images.member_image()

    def start(self) -> None:
        bind = os.environ.get(BIND_ENV, "").strip() or advertise_addr() or HOST
        port = int(os.environ.get(TIME_PORT_ENV, "").strip() or 0)
        self.time_server = TimeServer(bind, port).start()
        super().start()

    def clock_endpoint(self) -> tuple[str, int]:
        assert self.time_server is not None, "start() first"
        return advertise_addr() or HOST, self.time_server.port

    def close(self) -> None:
        try:
            self._remove_service()
            if self.members:
                runrecord.update(self.run_dir, **{CLOCKS_KEY: member_clocks(self.members)})
        finally:
            if self.time_server is not None:
                self.time_server.close()
                self.time_server = None
            super().close()

    # -- the member service -------------------------------------------------------------------
    def run_members(self, members_file: Path, members: list[dict[str, Any]]) -> None:
        """One replica per member: replica (slot) i runs members[i-1] (swarmmember.run_member)."""
        from docker.types import EndpointSpec, RestartPolicy, ServiceMode

        if self.service is not None:
            raise BackendError("the member service already runs (one launch of members per run)")
        self.members = members
        run = run_label(self.run_dir)
        self.service = self.client.services.create(
            self.image,
            args=[str(members_file)],
            name=f"bfh-{run}"[:63],
            env=["BFH_SLOT={{.Task.Slot}}"],
            mode=ServiceMode("replicated", replicas=len(members)),
            networks=["host"],  # the proxy's links on the manager, as mb.urls names them
            endpoint_spec=EndpointSpec(mode="dnsrr"),
            mounts=[f"{self.run_dir}:{self.run_dir}:rw"],
            restart_policy=RestartPolicy(condition="none"),  # an agent's exit is an observation
            stop_grace_period=STOP_GRACE_S * 10**9,
            user=f"{os.getuid()}:{os.getgid()}",
            labels={LABEL: run},
            container_labels={LABEL: run},
        )

    def _tasks(self) -> dict[int, tuple[str, str | None, int | None]]:
        """slot -> (state, container id, exit code), listed at most once per STATE_TTL_S."""
        with self._lock:
            if self.service is None:
                return {}
            if time.monotonic() - self._states_at > STATE_TTL_S:
                try:
                    tasks = self.service.tasks()
                except Exception:  # the daemon busy for a moment: the last listing stands
                    return self._states
                states: dict[int, tuple[str, str | None, int | None]] = {}
                for t in sorted(tasks, key=lambda t: t.get("CreatedAt", "")):
                    st = t.get("Status") or {}
                    cs = st.get("ContainerStatus") or {}
                    states[int(t.get("Slot") or 0)] = (
                        str(st.get("State")),
                        cs.get("ContainerID"),
                        cs.get("ExitCode"),
                    )
                self._states, self._states_at = states, time.monotonic()
            return self._states

    def member_state(self, slot: int) -> tuple[str, int | None]:
        """("starting" | "running" | "done", the task's exit code when it is known)."""
        state, _, code = self._tasks().get(slot, ("new", None, None))
        if state in _DONE:
            return "done", code
        return ("running" if state == "running" else "starting"), None

    def signal_member(self, slot: int, sig: int) -> None:
        """A signal to the member's container (this node's; a member on another node is stopped
        with the service, SIGTERM then SIGKILL after STOP_GRACE_S)."""
        _, cid, _ = self._tasks().get(slot, ("", None, None))
        if cid:
            with contextlib.suppress(Exception):  # gone already, or on another node
                self.client.api.kill(cid, signal.Signals(sig).name)

    def _remove_service(self, timeout: float = STOP_GRACE_S + 30.0) -> None:
        if self.service is None:
            return
        svc, self.service = self.service, None
        with contextlib.suppress(Exception):
            svc.remove()
        flt = {"label": f"com.docker.swarm.service.id={svc.id}"}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _container_ids(self.client, flt):
            time.sleep(0.5)
        _remove_containers(self.client, flt)  # what swarm did not reap


def _container_ids(client: Any, filters: dict[str, str]) -> list[str]:
    """The ids of the containers matching `filters`, from one listing. Not `containers.list()`:
    it inspects each container it listed, and one that swarm removes meanwhile raises NotFound
    ("No such container"; measured: 8 of 398 listings while a 30-replica service was removed)."""
    return [str(r["Id"]) for r in client.api.containers(all=True, filters=filters)]


def _remove_containers(client: Any, filters: dict[str, str]) -> None:
    for cid in _container_ids(client, filters):
        with contextlib.suppress(Exception):  # removed by swarm meanwhile
            client.api.remove_container(cid, force=True)


def clean_run(run: str) -> None:
    """Remove what a run's member service left (by its label), e.g. after a crash."""
    client = images.docker_client(timeout=60)
    for s in client.services.list(filters={"label": f"{LABEL}={run}"}):
        with contextlib.suppress(Exception):
            s.remove()
    _remove_containers(client, {"label": f"{LABEL}={run}"})
