"""Faults applied to one environment: the one way to apply a fault, whoever asks (a test by hand,
the nemesis playing a schedule, the benchmarks). Each kind (harness/faults/kinds.py) is applied by
its action (harness/faults/actions.py) over this environment's backend and fault proxy, each window
logged to faults.jsonl (harness/contracts/faultlog.py).

A fault is a window: `fault_start` when it is applied, `fault_end` when it is healed (for a kill,
when the group serves again). Targets are names from the plan or roles (harness/faults/targets.py),
resolved when the fault is applied. `Faults` is the actions' `FaultContext`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from harness.backends.base import Backend, BackendError
from harness.contracts.faultlog import FaultLog
from harness.deploy.plan import Link, Plan
from harness.faultproxy.client import ToxiproxyClient
from harness.faults.actions import action, release_links, unsupported
from harness.faults.context import FaultContext, Handle, OpenWindow
from harness.faults.kinds import KINDS, FaultKind, Params, kind
from harness.faults.targets import Targets

__all__ = ["Faults", "Handle", "OpenWindow"]


class Faults:
    def __init__(self, plan: Plan, backend: Backend, proxy: ToxiproxyClient, log: FaultLog) -> None:
        self.plan = plan
        self.backend = backend
        self.proxy = proxy
        self.log = log
        self.targets = Targets(plan, backend)
        self._open: dict[str, OpenWindow] = {}
        self._lock = threading.Lock()  # the nemesis applies steps from several threads

    # -- applying ------------------------------------------------------------------------------
    def start(
        self,
        fault: str | FaultKind,
        target: str | Sequence[str],
        params: Mapping[str, Any] | Params | None = None,
        **more: Any,
    ) -> Handle:
        """Apply a fault kind to the targets, roles resolved now (params validated by the kind);
        `stop` heals it; `Handle.targets` are the resolved targets."""
        k = kind(fault)
        act = action(k)
        if not act.supports(self.backend):
            raise self.unsupported(k)
        targets = self.resolve_all([target] if isinstance(target, str) else list(target))
        given = params if isinstance(params, Params) and not more else {**dict(params or {}), **more}
        return act.start(self, targets, k.parse(given))

    def stop(self, handle: Handle) -> None:
        action(handle.kind).stop(self, handle)

    def unsupported(self, k: FaultKind) -> BackendError:
        return unsupported(self.backend, k.name)

    # -- shortcuts the tests and benchmarks use ------------------------------------------------
    def kill(self, broker: str, wait_takeover: bool = True, timeout: float = 60.0) -> float | None:
        """kill -9 `broker` (or a role); returns the takeover time (kill to a member serving) when
        waited for."""
        h = self.start("kill", broker, wait_takeover=wait_takeover, timeout_s=timeout)
        return next(iter(h.results.values()), None)

    def sever(self, target: str, gap_s: float = 3.0) -> int:
        """Cut the target's client connections one at a time; returns how many were cut."""
        return int(sum(self.start("sever", target, gap_s=gap_s).results.values()))

    # -- windows -------------------------------------------------------------------------------
    def begin(
        self, fault: str, target: str, params: dict[str, Any] | None = None, links: list[str] | None = None
    ) -> str:
        fid = self.log.new_id(fault)
        window = OpenWindow(fault, target, params or {}, links or [])
        with self._lock:
            self._open[fid] = window
        self.log.write(fid, "fault_start", fault, target, window.params)
        return fid

    def end(self, fault_id: str, **extra: Any) -> None:
        with self._lock:
            w = self._open.pop(fault_id)
        self.log.write(fault_id, "fault_end", w.fault, w.target, {**w.params, **extra})

    def window(self, fault_id: str) -> OpenWindow | None:
        with self._lock:
            return self._open.get(fault_id)

    def open_windows(self) -> dict[str, OpenWindow]:
        with self._lock:
            return dict(self._open)

    # -- targets (harness/faults/targets.py) ---------------------------------------------------
    def resolve(self, target: str) -> list[str]:
        """A role (`master:G`, `slave:G`, `members:G`) to the brokers it names now; else as is."""
        return self.targets.resolve(target)

    def resolve_all(self, targets: list[str]) -> list[str]:
        return self.targets.resolve_all(targets)

    def links(self, target: str) -> list[Link]:
        return self.targets.links(target)

    def group_of(self, broker: str) -> str:
        return self.targets.group_of(broker)

    # -- healing -------------------------------------------------------------------------------
    def heal_all(self) -> None:
        """End every open fault, each healed as its kind heals; then reset the proxy."""
        still_open = self.open_windows()
        failed: dict[str, str] = {}
        for fid, w in still_open.items():
            try:
                if w.fault in KINDS:
                    action(w.fault).undo(self, w)
            except Exception as e:  # heal the rest; the window's end says what went wrong
                failed[fid] = f"{type(e).__name__}: {e}"
        self.proxy.reset()
        release_links(self.backend, [lk.name for lk in self.plan.links])
        for fid in still_open:
            if self.window(fid) is not None:  # a step's own heal may have ended it meanwhile
                extra = {"heal_error": failed[fid]} if fid in failed else {}
                self.end(fid, healed_by="heal_all", **extra)

    def restore(self, master_timeout: float = 60.0) -> None:
        """As a run ends: heal every open fault, start every stopped broker again and wait until
        every group serves."""
        self.heal_all()
        for b in self.plan.brokers:
            if not self.backend.alive(b):
                self.start("start", b)
        for g in self.plan.topology.groups:
            self.backend.wait_master(g.name, timeout=master_timeout)


def _is_context(faults: Faults) -> FaultContext:
    return faults  # mypy: Faults is the actions' context
