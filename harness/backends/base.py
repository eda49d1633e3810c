"""The backend interface: what the faults and the runner may do to brokers.

`Backend` is what every backend does. What only some can do is a capability protocol, checked
with isinstance (they are runtime-checkable): `SupportsIsolate` (cut a broker off its network:
Docker), `SupportsProxyMirror` (keep the fault proxy's links refusing while their broker does
not listen: both backends), `SupportsFaultProxy` (runs the fault proxy itself: Docker) and
`SupportsMembers` (runs a fleet's members itself, as a replicated service: Swarm).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from harness.deploy.plan import Plan

if TYPE_CHECKING:
    from harness.faultproxy.launcher import FaultProxyHandle


class BackendError(RuntimeError):
    """A broker could not be started or controlled; the message says why (with its log tail)."""


@runtime_checkable
class Backend(Protocol):
    plan: Plan

    def preflight(self) -> None:
        """Check prerequisites (Java, ActiveMQ, ports, folders) before anything starts."""

    def start(self) -> None:
        """Start every broker; return when each group has a serving master and its slaves wait."""

    def close(self) -> None:
        """Stop everything this backend started (idempotent)."""

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


@runtime_checkable
class SupportsIsolate(Protocol):
    """A backend that can partition a broker from its network (clients and bridges cut, its store
    lock kept) and join it again."""

    def isolate(self, broker: str) -> None: ...
    def reconnect(self, broker: str) -> None: ...


class LinkHold(Protocol):
    """The part of a link mirror a fault uses: links it must leave alone while the fault holds them."""

    def hold(self, links: list[str]) -> None: ...
    def release(self, links: list[str]) -> None: ...


@runtime_checkable
class SupportsProxyMirror(Protocol):
    """A backend that mirrors whether each broker listens onto the fault proxy's links (see
    linkmirror.py). The environment calls `attach_proxy` once the proxy holds the plan's links,
    before `start`; `mirror` is None until then (and after `close`)."""

    @property
    def mirror(self) -> LinkHold | None: ...

    def attach_proxy(self, proxy: ProxyLinks) -> None: ...


class ProxyLinks(Protocol):
    """What the link mirror needs of the fault proxy (a ToxiproxyClient has it)."""

    def proxies(self) -> dict[str, dict[str, object]]: ...
    def enable(self, name: str) -> object: ...
    def disable(self, name: str) -> object: ...


@runtime_checkable
class SupportsFaultProxy(Protocol):
    """A backend that runs the run's fault proxy itself (e.g. as a container); the environment
    uses it instead of starting the proxy process."""

    def fault_proxy(self, run_dir: Path, seed: int | None = None) -> FaultProxyHandle: ...


@runtime_checkable
class SupportsMembers(Protocol):
    """A backend that runs a fleet's members itself (harness.run.members hands them over): replica
    i of one service runs `members[i-1]` of the members file (harness/backends/swarmmember.py)."""

    def clock_endpoint(self) -> tuple[str, int]: ...  # the manager's time endpoint, as members dial it
    def run_members(self, members_file: Path, members: list[dict[str, Any]]) -> None: ...
    def member_state(self, slot: int) -> tuple[str, int | None]: ...  # ("starting"|"running"|"done", exit)
    def signal_member(self, slot: int, sig: int) -> None: ...
