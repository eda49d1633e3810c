"""Fakes for the fault tests: a backend through the Backend protocol, its port mirror, and a proxy
client that records calls. Brokers are states in a dict; every call is recorded with its time."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

from harness.backends.base import Backend, BackendError
from harness.deploy.plan import Plan, make_plan
from harness.topology import builtin_topology


def fake_plan(tmp_path: Path, topology: str = "network-of-pairs") -> Plan:
    """A plan without reserving ports (nothing listens on them)."""
    return make_plan(builtin_topology(topology), tmp_path, port_pool=itertools.count(42000))


class FakeMirror:
    def __init__(self) -> None:
        self.held: set[str] = set()
        self.calls: list[tuple[str, list[str]]] = []

    def hold(self, links: list[str]) -> None:
        self.calls.append(("hold", sorted(links)))
        self.held.update(links)

    def release(self, links: list[str]) -> None:
        self.calls.append(("release", sorted(links)))
        self.held.difference_update(links)


class FakeBackend:
    """Every group starts with its first member master, the others slaves. Killing or stopping
    the master hands the group to the next live member (as the shared store lock does)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.states: dict[str, str] = {}
        for g in plan.topology.groups:
            for i, b in enumerate(plan.members(g.name)):
                self.states[b.name] = "master" if i == 0 else "slave"
        self.calls: list[tuple[float, str, str]] = []
        self.mirror = FakeMirror()
        self._lock = threading.Lock()

    def _call(self, what: str, broker: str) -> None:
        with self._lock:
            self.calls.append((time.monotonic(), what, broker))
        if broker not in self.states:
            raise BackendError(f"unknown broker {broker!r}")

    def called(self, what: str) -> list[str]:
        return [b for _, w, b in self.calls if w == what]

    def _running(self, broker: str) -> None:
        if self.states[broker] == "down":
            raise BackendError(f"broker {broker} is not running")

    def _down(self, broker: str) -> None:
        group = self.plan.brokers[broker].group
        was_master = self.states[broker] == "master"
        self.states[broker] = "down"
        if was_master:
            for b in self.plan.members(group):
                if self.states[b.name] == "slave":
                    self.states[b.name] = "master"
                    break

    # -- the Backend protocol
    def preflight(self) -> None: ...
    def start(self) -> None: ...
    def close(self) -> None: ...
    def attach_proxy(self, proxy: object) -> None: ...

    def kill(self, broker: str) -> None:
        self._call("kill", broker)
        self._running(broker)
        self._down(broker)

    def stop(self, broker: str) -> None:
        self._call("stop", broker)
        self._running(broker)
        self._down(broker)

    def pause(self, broker: str) -> None:
        self._call("pause", broker)
        self._running(broker)
        self.states[broker] = "paused"

    def resume(self, broker: str) -> None:
        self._call("resume", broker)
        self._running(broker)
        self.states[broker] = "master" if self.master(self.plan.brokers[broker].group) is None else "slave"

    def start_broker(self, broker: str) -> None:
        self._call("start_broker", broker)
        if self.alive(broker):
            raise BackendError(f"broker {broker} is already running")
        self.states[broker] = "master" if self.master(self.plan.brokers[broker].group) is None else "slave"

    def restart(self, broker: str) -> None:
        self._call("restart", broker)
        if self.alive(broker):
            self._down(broker)
        self.states[broker] = "master" if self.master(self.plan.brokers[broker].group) is None else "slave"

    def alive(self, broker: str) -> bool:
        return self.states.get(broker, "down") != "down"

    def master(self, group: str) -> str | None:
        return next((b.name for b in self.plan.members(group) if self.states[b.name] == "master"), None)

    def wait_master(self, group: str, timeout: float = 60.0) -> str:
        m = self.master(group)
        if m is None:
            raise BackendError(f"no master in group {group}")
        return m

    def state(self, broker: str) -> str:
        return self.states[broker]

    def broker_log(self, broker: str) -> Path:
        return Path("/nonexistent") / broker

    def log_size(self, broker: str) -> int:
        return 0

    def log_since(self, broker: str, offset: int = 0) -> str:
        return ""


class FakeNetworkBackend(FakeBackend):
    """A backend that can cut brokers off their network (as the Docker backend does)."""

    def __init__(self, plan: Plan) -> None:
        super().__init__(plan)
        self.isolated: set[str] = set()

    def isolate(self, broker: str) -> None:
        self._call("isolate", broker)
        self._running(broker)
        self.isolated.add(broker)

    def reconnect(self, broker: str) -> None:
        self._call("reconnect", broker)
        self.isolated.discard(broker)


class FakeProxy:
    """Records the fault helpers the kinds call (ToxiproxyClient's, by link name)."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        if name not in (
            "disable",
            "black_hole",
            "latency",
            "bandwidth",
            "reset_peer",
            "slice",
            "limit",
            "heal",
            "reset",
        ):
            raise AttributeError(name)

        def record(*args: Any) -> None:
            self.calls.append((time.monotonic(), name, args))

        return record

    def called(self, what: str) -> list[tuple[Any, ...]]:
        return [a for _, w, a in self.calls if w == what]


def _protocol_check(plan: Plan) -> Backend:
    return FakeBackend(plan)  # mypy: the fake satisfies the Backend protocol
