"""Faults applied to one environment: the kinds of harness/faults/kinds.py over its backend and
fault proxy, each window logged to faults.jsonl (harness/contracts/faultlog.py).

A fault is a window: `fault_start` when it is applied, `fault_end` when it is healed (for a kill,
when the group serves again). Targets are names from the plan: a broker (all of its links), a
link, a group (all links of its members) or `bridges`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.backends.base import Backend, BackendError, SupportsProxyMirror
from harness.contracts.faultlog import FaultLog
from harness.deploy.plan import Link, Plan
from harness.faultproxy.client import ToxiproxyClient
from harness.faults.kinds import KINDS, FaultKind, Handle, Params, kind

__all__ = ["Faults", "Handle", "OpenWindow"]


@dataclass
class OpenWindow:
    fault: str
    target: str
    params: dict[str, Any]
    links: list[str] = field(default_factory=list)


class Faults:
    def __init__(self, plan: Plan, backend: Backend, proxy: ToxiproxyClient, log: FaultLog) -> None:
        self.plan = plan
        self.backend = backend
        self.proxy = proxy
        self.log = log
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
        """Apply a fault kind to the targets (params validated by the kind); `stop` heals it."""
        k = kind(fault)
        if not k.supports(self.backend):
            raise self.unsupported(k)
        targets = [target] if isinstance(target, str) else list(target)
        given = params if isinstance(params, Params) and not more else {**dict(params or {}), **more}
        return k.start(self, targets, k.parse(given))

    def stop(self, handle: Handle) -> None:
        kind(handle.kind).stop(self, handle)

    def unsupported(self, k: FaultKind) -> BackendError:
        return BackendError(f"the {type(self.backend).__name__} cannot {k.name} brokers (docker can)")

    # -- shortcuts the tests and benchmarks use ------------------------------------------------
    def kill(self, broker: str, wait_takeover: bool = True, timeout: float = 60.0) -> float | None:
        """kill -9 `broker`; returns the takeover time (kill to a member serving) when waited for."""
        h = self.start("kill", broker, wait_takeover=wait_takeover, timeout_s=timeout)
        return h.results.get(broker)

    def sever(self, target: str, gap_s: float = 3.0) -> int:
        """Cut the target's client connections one at a time; returns how many were cut."""
        return int(self.start("sever", target, gap_s=gap_s).results.get(target, 0))

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

    # -- targets -------------------------------------------------------------------------------
    def links(self, target: str) -> list[Link]:
        """Resolve a target name to proxied links."""
        if target == "bridges":
            return [lk for lk in self.plan.links if lk.kind == "bridge"]
        if target.startswith("bridge:"):  # bridge:SRC->DST, the links of one group's bridge to another
            src, _, dst = target.removeprefix("bridge:").partition("->")
            found = self.plan.bridge_links(src, dst)
            if not found:
                raise ValueError(f"no bridge from group {src!r} to group {dst!r} in target {target!r}")
            return found
        if target in self.plan.brokers:
            return self.plan.links_of(target)
        groups = {g.name for g in self.plan.topology.groups}
        if target in groups:
            names = {b.name for b in self.plan.members(target)}
            return [lk for lk in self.plan.links if lk.broker in names or lk.source in names]
        found = [lk for lk in self.plan.links if lk.name == target]
        if not found:
            raise ValueError(f"unknown fault target {target!r}: not a broker, group, link or 'bridges'")
        return found

    def link_names(self, targets: list[str]) -> list[str]:
        return sorted({lk.name for t in targets for lk in self.links(t)})

    def group_of(self, broker: str) -> str:
        return self.plan.brokers[broker].group

    # -- the backend's port mirror (it enables/disables links as brokers listen), if it has one --
    def hold_links(self, names: list[str]) -> None:
        if isinstance(self.backend, SupportsProxyMirror) and self.backend.mirror is not None:
            self.backend.mirror.hold(names)

    def release_links(self, names: list[str]) -> None:
        if isinstance(self.backend, SupportsProxyMirror) and self.backend.mirror is not None:
            self.backend.mirror.release(names)

    # -- healing -------------------------------------------------------------------------------
    def heal_all(self) -> None:
        """End every open fault, each healed as its kind heals; then reset the proxy."""
        still_open = self.open_windows()
        failed: dict[str, str] = {}
        for fid, w in still_open.items():
            k = KINDS.get(w.fault)
            try:
                if k is not None:
                    k.undo(self, w)
            except Exception as e:  # heal the rest; the window's end says what went wrong
                failed[fid] = f"{type(e).__name__}: {e}"
        self.proxy.reset()
        self.release_links([lk.name for lk in self.plan.links])
        for fid in still_open:
            if self.window(fid) is not None:  # a step's own heal may have ended it meanwhile
                extra = {"heal_error": failed[fid]} if fid in failed else {}
                self.end(fid, healed_by="heal_all", **extra)
