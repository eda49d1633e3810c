"""Who serves each group, read the same way by every backend: a member is the master when it is
alive and serving (a slave waiting for the store lock serves nothing). A backend supplies
`alive`, `_serving`, `_paused`, `mirror`, `plan` and `logs`; this supplies the rest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.backends.ready import wait_until


class GroupState:
    plan: Any
    logs: Any
    _paused: set[str]

    def alive(self, broker: str) -> bool:
        raise NotImplementedError

    def _serving(self, broker: str) -> bool:
        raise NotImplementedError

    mirror: Any

    def _sync_links(self) -> None:
        """Let the port mirror (if any) enable or disable links now that a broker changed."""
        if self.mirror is not None:
            self.mirror.sync_now()

    def master(self, group: str) -> str | None:
        """The member serving clients now: alive and serving."""
        for b in self.plan.members(group):
            if self.alive(b.name) and self._serving(b.name):
                return b.name
        return None

    def state(self, broker: str) -> str:
        """ "master", "slave" (alive, waiting for the lock), "paused" or "down"."""
        if not self.alive(broker):
            return "down"
        if broker in self._paused:
            return "paused"
        return "master" if self._serving(broker) else "slave"

    def states(self) -> dict[str, str]:
        return {b: self.state(b) for b in self.plan.brokers}

    def wait_master(self, group: str, timeout: float = 60.0) -> str:
        m = wait_until(
            lambda: self.master(group),
            timeout,
            f"a master in group {group}",
            diagnose=lambda: f"states: {self.states()}",
        )
        self._sync_links()
        return m

    def broker_log(self, broker: str) -> Path:
        return Path(self.logs.path(broker))

    def log_size(self, broker: str) -> int:
        """A position in the broker's log, for `log_since`."""
        return int(self.logs.size(broker))

    def log_since(self, broker: str, offset: int = 0) -> str:
        return str(self.logs.since(broker, offset))
