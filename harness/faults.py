"""Fault actions over the backend and the fault proxy; every action is logged to faults.jsonl.

A fault is a window: `fault_start` when it is applied, `fault_end` when it is healed (for a kill,
when the group serves again). Targets are names from the plan: a broker (all of its links), a
link, a group (all links of its members) or `bridges`.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from harness.backends.base import Backend, BackendError
from harness.faultproxy.client import ToxiproxyClient
from harness.plan import HOST, Link, Plan


def _established_client_ports(listen_port: int) -> list[int]:
    """Local ports of the client sockets connected to a proxy listen port."""
    out = subprocess.run(
        ["ss", "-tnH", "state", "established", "dst", f"{HOST}:{listen_port}"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    ports = []
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 4 and cols[-1].endswith(f":{listen_port}"):
            ports.append(int(cols[-2].rsplit(":", 1)[1]))
    return sorted(ports)


class FaultLog:
    def __init__(self, path: Path, run_id: str) -> None:
        self.path = path
        self.run_id = run_id
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def new_id(self, fault: str) -> str:
        return f"f{next(self._ids):03d}-{fault}"

    def write(self, fault_id: str, event: str, fault: str, target: str, params: dict[str, Any]) -> None:
        rec = {
            "ts": time.time(),
            "run": self.run_id,
            "fault_id": fault_id,
            "event": event,
            "fault": fault,
            "target": target,
            "params": params,
        }
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")


class Faults:
    def __init__(self, plan: Plan, backend: Backend, proxy: ToxiproxyClient, log: FaultLog) -> None:
        self.plan = plan
        self.backend = backend
        self.proxy = proxy
        self.log = log
        self._open: dict[str, tuple[str, str, dict[str, Any], list[str]]] = {}
        self._lock = threading.Lock()  # the nemesis applies steps from several threads

    # -- windows -------------------------------------------------------------------------------
    def begin(
        self, fault: str, target: str, params: dict[str, Any] | None = None, links: list[str] | None = None
    ) -> str:
        fid = self.log.new_id(fault)
        params = params or {}
        with self._lock:
            self._open[fid] = (fault, target, params, links or [])
        self.log.write(fid, "fault_start", fault, target, params)
        return fid

    def end(self, fault_id: str, **extra: Any) -> None:
        with self._lock:
            fault, target, params, _ = self._open.pop(fault_id)
        self.log.write(fault_id, "fault_end", fault, target, {**params, **extra})

    # -- targets -------------------------------------------------------------------------------
    def links(self, target: str) -> list[Link]:
        """Resolve a target name to proxied links."""
        if target == "bridges":
            return [lk for lk in self.plan.links if lk.kind == "bridge"]
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

    def group_of(self, broker: str) -> str:
        return self.plan.brokers[broker].group

    # -- broker faults -------------------------------------------------------------------------
    def kill(self, broker: str, wait_takeover: bool = True, timeout: float = 60.0) -> float | None:
        """kill -9 `broker`; with `wait_takeover`, end the window when its group serves again.

        Returns the takeover time in seconds (kill to a member's ports open) when waited for.
        """
        return self._down("kill", broker, self.backend.kill, wait_takeover, timeout)

    def stop(self, broker: str, wait_takeover: bool = True, timeout: float = 60.0) -> float | None:
        return self._down("stop", broker, self.backend.stop, wait_takeover, timeout)

    def _down(self, fault: str, broker: str, action: Any, wait: bool, timeout: float) -> float | None:
        group = self.group_of(broker)
        fid = self.begin(fault, broker, {"group": group})
        t0 = time.monotonic()
        action(broker)
        if not wait:
            self.end(fid)
            return None
        new_master = self.backend.wait_master(group, timeout)
        takeover = time.monotonic() - t0
        self.end(fid, new_master=new_master, takeover_s=round(takeover, 3))
        return takeover

    def pause(self, broker: str) -> str:
        fid = self.begin("pause", broker, {"group": self.group_of(broker)})
        self.backend.pause(broker)
        return fid

    def resume(self, fault_id: str) -> None:
        _, target, _, _ = self._open[fault_id]
        self.backend.resume(target)
        self.end(fault_id)

    def isolate(self, broker: str) -> str:
        """Disconnect a broker from its network (a real partition, bridges included); backends
        without networks (local) raise BackendError."""
        isolate = getattr(self.backend, "isolate", None)
        if isolate is None:
            raise BackendError(f"the {type(self.backend).__name__} cannot isolate brokers (docker can)")
        fid = self.begin("isolate", broker, {"group": self.group_of(broker)})
        isolate(broker)
        return fid

    def reconnect(self, fault_id: str) -> None:
        _, target, _, _ = self._open[fault_id]
        self.backend.reconnect(target)  # type: ignore[attr-defined]
        self.end(fault_id)

    def restart(self, broker: str) -> None:
        fid = self.begin("restart", broker, {"group": self.group_of(broker)})
        self.backend.restart(broker)
        self.end(fid)

    def start_broker(self, broker: str) -> None:
        fid = self.begin("start", broker, {"group": self.group_of(broker)})
        self.backend.start_broker(broker)
        self.end(fid)

    # -- link faults (through the fault proxy) -------------------------------------------------
    def _link_fault(self, fault: str, target: str | list[str], params: dict[str, Any], apply: Any) -> str:
        targets = [target] if isinstance(target, str) else list(target)
        names = sorted({lk.name for t in targets for lk in self.links(t)})
        fid = self.begin(fault, ",".join(targets), params, names)
        for n in names:
            apply(n)
        return fid

    def _mirror(self) -> Any:
        """The backend's port mirror (it enables/disables links as brokers listen), if it has one."""
        return getattr(self.backend, "mirror", None)

    def down(self, target: str | list[str]) -> str:
        """Disable links: new connections refused, existing ones closed."""
        targets = [target] if isinstance(target, str) else list(target)
        mirror = self._mirror()
        if mirror is not None:  # keep the mirror from re-enabling them mid-fault
            mirror.hold(sorted({lk.name for t in targets for lk in self.links(t)}))
        return self._link_fault("link_down", target, {}, self.proxy.disable)

    def partition(self, target: str | list[str]) -> str:
        """Cut links silently (black hole both ways): the peers see no close, only silence."""
        return self._link_fault("partition", target, {}, self.proxy.black_hole)

    def latency(self, target: str | list[str], ms: int, jitter: int = 0) -> str:
        return self._link_fault(
            "latency",
            target,
            {"latency_ms": ms, "jitter_ms": jitter},
            lambda n: self.proxy.latency(n, ms, jitter),
        )

    def bandwidth(self, target: str | list[str], kbps: int) -> str:
        return self._link_fault(
            "bandwidth", target, {"rate_kbps": kbps}, lambda n: self.proxy.bandwidth(n, kbps)
        )

    def reset_peer(self, target: str | list[str], timeout_ms: int = 0) -> str:
        return self._link_fault(
            "reset_peer", target, {"timeout_ms": timeout_ms}, lambda n: self.proxy.reset_peer(n, timeout_ms)
        )

    def slice(self, target: str | list[str], avg: int = 64, var: int = 32, delay_us: int = 100) -> str:
        return self._link_fault(
            "slicer",
            target,
            {"average_size": avg, "size_variation": var, "delay_us": delay_us},
            lambda n: self.proxy.slice(n, avg, var, delay_us),
        )

    def limit(self, target: str | list[str], nbytes: int) -> str:
        return self._link_fault(
            "limit_data", target, {"bytes": nbytes}, lambda n: self.proxy.limit(n, nbytes)
        )

    def sever(self, target: str, gap_s: float = 3.0) -> int:
        """Abort the established client connections of a link one at a time, `gap_s` apart.

        Each cut is its own fault window, so the checker can see which roles each cut disturbed;
        an agent with one connection per subscription shows exactly one role reconnecting per cut.
        Uses the kernel's socket destroy (`ss -K`), so any agent and any fault proxy work.
        """
        cut = 0
        for link in self.links(target):
            for sport in _established_client_ports(link.listen_port):
                fid = self.begin("sever", link.name, {"client_port": sport})
                subprocess.run(
                    ["ss", "-K", "dst", HOST, "dport", "=", str(link.listen_port), "sport", "=", str(sport)],
                    capture_output=True,
                    check=False,
                )
                cut += 1
                time.sleep(gap_s)
                self.end(fid)
        return cut

    def heal(self, fault_id: str) -> None:
        """Undo one link fault: its links lose every toxic and are enabled again."""
        _, _, _, names = self._open[fault_id]
        for n in names:
            self.proxy.heal(n)
        mirror = self._mirror()
        if mirror is not None:  # heal() enabled the links: let the mirror re-check them
            mirror.release(names)
        self.end(fault_id)

    def heal_all(self) -> None:
        """End every open fault: resume paused brokers, reset the proxy."""
        with self._lock:
            still_open = list(self._open.items())
        for _fid, (fault, target, _, _) in still_open:
            if fault == "pause" and self.backend.alive(target):
                self.backend.resume(target)
            if fault == "isolate" and self.backend.alive(target):
                self.backend.reconnect(target)  # type: ignore[attr-defined]
        self.proxy.reset()
        mirror = self._mirror()
        if mirror is not None:
            mirror.release([lk.name for lk in self.plan.links])
        for fid, _ in still_open:
            self.end(fid, healed_by="heal_all")
