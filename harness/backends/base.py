"""The backend interface: what the faults and the runner may do to brokers."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from harness.plan import Plan


class BackendError(RuntimeError):
    """A broker could not be started or controlled; the message says why (with its log tail)."""


class Backend(Protocol):
    plan: Plan

    def preflight(self) -> None:
        """Check prerequisites (Java, ActiveMQ, ports, folders) before anything starts."""

    def start(self) -> None:
        """Start every broker; return when each group has a serving master and its slaves wait."""

    def close(self) -> None:
        """Stop everything this backend started (idempotent)."""

    def attach_proxy(self, proxy: object) -> None:
        """Keep the fault proxy's links refusing connections while their broker does not listen
        (a dead or slave broker refuses connections; a bare TCP proxy would accept them)."""

    def kill(self, broker: str) -> None: ...  # SIGKILL
    def stop(self, broker: str) -> None: ...  # graceful
    def pause(self, broker: str) -> None: ...  # SIGSTOP
    def resume(self, broker: str) -> None: ...  # SIGCONT
    def start_broker(self, broker: str) -> None: ...  # start a stopped/killed member again
    def restart(self, broker: str) -> None: ...  # kill if running, then start

    def alive(self, broker: str) -> bool: ...
    def master(self, group: str) -> str | None:
        """The member currently serving clients, or None."""

    def wait_master(self, group: str, timeout: float = 60.0) -> str:
        """Block until some member of `group` serves; return its name."""

    def state(self, broker: str) -> str:
        """ "master", "slave" (alive, waiting for the store lock), "paused" or "down"."""

    def broker_log(self, broker: str) -> Path: ...
    def log_size(self, broker: str) -> int: ...  # a position in the broker log, for log_since
    def log_since(self, broker: str, offset: int = 0) -> str: ...
