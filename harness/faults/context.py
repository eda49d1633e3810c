"""What a fault action works with: the narrow context an environment's `Faults` provides, and the
two records actions hand back and forth (a started fault's `Handle`, an `OpenWindow` of
faults.jsonl).

The actions (harness/faults/actions.py) see only `FaultContext`: the backend, the fault proxy
client, the links a target names, and opening/closing windows. They never reach back into `Faults`
or apply another fault through it; a kind made of others composes their actions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.backends.base import Backend
from harness.deploy.plan import Link
from harness.faultproxy.client import ToxiproxyClient
from harness.faults.kinds import Params


@dataclass
class OpenWindow:
    fault: str
    target: str
    params: dict[str, Any]
    links: list[str] = field(default_factory=list)


@dataclass
class Handle:
    """A started fault: the windows `stop` closes, and what the start measured."""

    kind: str
    targets: list[str]
    params: Params
    windows: list[str] = field(default_factory=list)  # fault ids still open
    results: dict[str, Any] = field(default_factory=dict)  # takeover_s per broker, cuts per link


class FaultContext(Protocol):
    """What an action may use of the environment it applies a fault to."""

    @property
    def backend(self) -> Backend: ...

    @property
    def proxy(self) -> ToxiproxyClient: ...

    def links(self, target: str) -> list[Link]:
        """The proxied links a (resolved) target names."""
        ...

    def group_of(self, broker: str) -> str: ...

    def begin(
        self, fault: str, target: str, params: dict[str, Any] | None = None, links: list[str] | None = None
    ) -> str:
        """Open a window (`fault_start` in faults.jsonl); returns its fault id."""
        ...

    def end(self, fault_id: str, **extra: Any) -> None:
        """Close a window (`fault_end`), `extra` added to its params."""
        ...

    def window(self, fault_id: str) -> OpenWindow | None:
        """The window if still open."""
        ...
