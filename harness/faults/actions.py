"""How each fault kind of harness/faults/kinds.py is applied and healed: one action per kind.

An action has `start(ctx, targets, params) -> Handle`, `stop(ctx, handle)` and `undo(ctx, window)`:
how one open window heals, used by `stop` and by `Faults.heal_all`. It works only through the
narrow `FaultContext` (harness/faults/context.py), on targets already resolved (no roles), and logs
each window under its kind's name. A kind made of others composes their actions directly (a kill's
`stop` is the `start` action).
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable

from harness.backends.base import BackendError, SupportsIsolate, SupportsProxyMirror
from harness.faults.context import FaultContext, Handle, OpenWindow
from harness.faults.kinds import (
    KINDS,
    BandwidthParams,
    FaultKind,
    LatencyParams,
    LimitDataParams,
    NoParams,
    Params,
    ResetPeerParams,
    SeverParams,
    SlicerParams,
    TakeoverParams,
)


def unsupported(backend: object, fault: str) -> BackendError:
    return BackendError(f"the {type(backend).__name__} cannot {fault} brokers (docker can)")


class Action:
    name: str  # the kind it applies (harness.faults.kinds.KINDS)

    def supports(self, backend: object) -> bool:
        return True

    def start(self, ctx: FaultContext, targets: list[str], params: Params) -> Handle:
        raise NotImplementedError

    def stop(self, ctx: FaultContext, handle: Handle) -> None:
        for fid in handle.windows:
            window = ctx.window(fid)
            if window is not None:
                self.undo(ctx, window)
                ctx.end(fid)

    def undo(self, ctx: FaultContext, window: OpenWindow) -> None:
        """Heal one open window of this kind (nothing by default)."""


# -- broker faults -------------------------------------------------------------------------------
def _begin_on(ctx: FaultContext, fault: str, broker: str) -> str:
    return ctx.begin(fault, broker, {"group": ctx.group_of(broker)})


class StartBroker(Action):
    """Start a stopped or killed member again: an instant window."""

    name = "start"

    def start(self, ctx: FaultContext, targets: list[str], params: Params) -> Handle:
        for broker in targets:
            fid = _begin_on(ctx, self.name, broker)
            ctx.backend.start_broker(broker)
            ctx.end(fid)
        return Handle(self.name, targets, params)


START = StartBroker()


class _Down(Action):
    """kill/stop: the window ends when the group serves again; `stop` starts the broker again."""

    def act(self, ctx: FaultContext, broker: str) -> None:
        raise NotImplementedError

    def start(self, ctx: FaultContext, targets: list[str], params: Params) -> Handle:
        assert isinstance(params, TakeoverParams)
        handle = Handle(self.name, targets, params)
        wait = params.wait_takeover and len(targets) == 1

        def one(broker: str) -> None:
            group = ctx.group_of(broker)
            fid = _begin_on(ctx, self.name, broker)
            t0 = time.monotonic()
            self.act(ctx, broker)
            if not wait:
                ctx.end(fid)
                return
            new_master = ctx.backend.wait_master(group, params.timeout_s)
            took = time.monotonic() - t0
            ctx.end(fid, new_master=new_master, takeover_s=round(took, 3))
            handle.results[broker] = took

        _each_at_once(one, targets)
        return handle

    def stop(self, ctx: FaultContext, handle: Handle) -> None:
        for broker in handle.targets:
            if not ctx.backend.alive(broker):
                START.start(ctx, [broker], NoParams())


class Kill(_Down):
    name = "kill"

    def act(self, ctx: FaultContext, broker: str) -> None:
        ctx.backend.kill(broker)


class Stop(_Down):
    name = "stop"

    def act(self, ctx: FaultContext, broker: str) -> None:
        ctx.backend.stop(broker)


class Pause(Action):
    name = "pause"

    def start(self, ctx: FaultContext, targets: list[str], params: Params) -> Handle:
        handle = Handle(self.name, targets, params)
        for broker in targets:
            handle.windows.append(_begin_on(ctx, self.name, broker))
            ctx.backend.pause(broker)
        return handle

    def undo(self, ctx: FaultContext, window: OpenWindow) -> None:
        if ctx.backend.alive(window.target):
            ctx.backend.resume(window.target)


class Restart(Action):
    name = "restart"

    def start(self, ctx: FaultContext, targets: list[str], params: Params) -> Handle:
        for broker in targets:
            fid = _begin_on(ctx, self.name, broker)
            ctx.backend.restart(broker)
            ctx.end(fid)
        return Handle(self.name, targets, params)


def _isolating(backend: object) -> SupportsIsolate | None:
    """The backend if it can cut a broker off its network (isolate/reconnect), else None."""
    return backend if isinstance(backend, SupportsIsolate) else None


class Isolate(Action):
    name = "isolate"

    def supports(self, backend: object) -> bool:
        return _isolating(backend) is not None

    def start(self, ctx: FaultContext, targets: list[str], params: Params) -> Handle:
        backend = _isolating(ctx.backend)
        if backend is None:
            raise unsupported(ctx.backend, self.name)
        handle = Handle(self.name, targets, params)
        for broker in targets:
            handle.windows.append(_begin_on(ctx, self.name, broker))
            backend.isolate(broker)
        return handle

    def undo(self, ctx: FaultContext, window: OpenWindow) -> None:
        backend = _isolating(ctx.backend)
        if backend is not None and ctx.backend.alive(window.target):
            backend.reconnect(window.target)


# -- link faults (through the fault proxy) -------------------------------------------------------
def hold_links(backend: object, names: list[str]) -> None:
    """Keep the backend's port mirror (it enables/disables links as brokers listen) off `names`."""
    if isinstance(backend, SupportsProxyMirror) and backend.mirror is not None:
        backend.mirror.hold(names)


def release_links(backend: object, names: list[str]) -> None:
    if isinstance(backend, SupportsProxyMirror) and backend.mirror is not None:
        backend.mirror.release(names)


def link_names(ctx: FaultContext, targets: list[str]) -> list[str]:
    return sorted({lk.name for t in targets for lk in ctx.links(t)})


class _OnLinks(Action):
    """One window over every link of the targets; healed by removing the toxics and enabling."""

    def apply(self, ctx: FaultContext, link: str, params: Params) -> None:
        raise NotImplementedError

    def start(self, ctx: FaultContext, targets: list[str], params: Params) -> Handle:
        names = link_names(ctx, targets)
        fid = ctx.begin(self.name, ",".join(targets), params.model_dump(), names)
        for n in names:
            self.apply(ctx, n, params)
        return Handle(self.name, targets, params, [fid])

    def undo(self, ctx: FaultContext, window: OpenWindow) -> None:
        for n in window.links:
            ctx.proxy.heal(n)
        release_links(ctx.backend, window.links)  # heal() enabled them: let the mirror re-check


class LinkDown(_OnLinks):
    name = "down"

    def start(self, ctx: FaultContext, targets: list[str], params: Params) -> Handle:
        hold_links(ctx.backend, link_names(ctx, targets))  # the mirror must not re-enable them mid-fault
        return super().start(ctx, targets, params)

    def apply(self, ctx: FaultContext, link: str, params: Params) -> None:
        ctx.proxy.disable(link)


class Partition(_OnLinks):
    name = "partition"

    def apply(self, ctx: FaultContext, link: str, params: Params) -> None:
        ctx.proxy.black_hole(link)


class Latency(_OnLinks):
    name = "latency"

    def apply(self, ctx: FaultContext, link: str, params: Params) -> None:
        assert isinstance(params, LatencyParams)
        ctx.proxy.latency(link, params.latency_ms, params.jitter_ms)


class ResetPeer(_OnLinks):
    name = "reset_peer"

    def apply(self, ctx: FaultContext, link: str, params: Params) -> None:
        assert isinstance(params, ResetPeerParams)
        ctx.proxy.reset_peer(link, params.timeout_ms)


class Slicer(_OnLinks):
    name = "slicer"

    def apply(self, ctx: FaultContext, link: str, params: Params) -> None:
        assert isinstance(params, SlicerParams)
        ctx.proxy.slice(link, params.average_size, params.size_variation, params.delay_us)


class Bandwidth(_OnLinks):
    name = "bandwidth"

    def apply(self, ctx: FaultContext, link: str, params: Params) -> None:
        assert isinstance(params, BandwidthParams)
        ctx.proxy.bandwidth(link, params.rate_kbps)


class LimitData(_OnLinks):
    name = "limit_data"

    def apply(self, ctx: FaultContext, link: str, params: Params) -> None:
        assert isinstance(params, LimitDataParams)
        ctx.proxy.limit(link, params.bytes, hold_ms=params.hold_ms)


class Sever(Action):
    """Each cut is its own window, so the verdict sees which roles each cut disturbed. It destroys
    the proxy's end of each connection (the kernel's socket destroy, `ss -K`), found by the link's
    listen address: any agent, any fault proxy on this host, and clients on other hosts (a swarm
    member on another node, `BFH_SWARM_ADDR`) alike; the client sees a reset."""

    name = "sever"

    def start(self, ctx: FaultContext, targets: list[str], params: Params) -> Handle:
        assert isinstance(params, SeverParams)
        handle = Handle(self.name, targets, params)
        for target in targets:
            cut = 0
            for link in ctx.links(target):
                for peer in established_clients(link.host, link.listen_port):
                    fid = ctx.begin(self.name, link.name, {"client_port": peer[1]})
                    _destroy(link.host, link.listen_port, peer)
                    cut += 1
                    time.sleep(params.gap_s)
                    ctx.end(fid)
            handle.results[target] = cut
        return handle


def _addr(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _destroy(host: str, listen_port: int, peer: tuple[str, int]) -> None:
    """Abort the proxy's socket of one client connection (established only: never the listener)."""
    cmd = ["ss", "-K", "-tn", "state", "established", "src", _addr(host, listen_port), "dst", _addr(*peer)]
    subprocess.run(cmd, capture_output=True, check=False)


def established_clients(host: str, listen_port: int) -> list[tuple[str, int]]:
    """(address, port) of each client connected to a proxy listen address, as the proxy's accepted
    sockets name their peers."""
    out = subprocess.run(
        ["ss", "-tnH", "state", "established", "src", _addr(host, listen_port)],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    peers = []
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 4 and cols[-2].endswith(f":{listen_port}"):
            addr, port = cols[-1].rsplit(":", 1)
            peers.append((addr.strip("[]"), int(port)))
    return sorted(peers, key=lambda p: (p[1], p[0]))


def _each_at_once(fn: Callable[[str], None], targets: list[str]) -> None:
    """Run `fn` for every target at the same time; re-raise the first error once all are done."""
    errors: list[BaseException] = []

    def run(t: str) -> None:
        try:
            fn(t)
        except BaseException as e:  # noqa: BLE001 - handed to the caller below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(t,), name=f"fault-{t}") for t in targets]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]


# -- the registry: one action per kind -----------------------------------------------------------
_ACTIONS: list[Action] = [
    Kill(),
    Stop(),
    Pause(),
    Restart(),
    Isolate(),
    START,
    LinkDown(),
    Partition(),
    Latency(),
    ResetPeer(),
    Slicer(),
    Bandwidth(),
    LimitData(),
    Sever(),
]
ACTIONS: dict[str, Action] = {a.name: a for a in _ACTIONS}
assert set(ACTIONS) == set(KINDS), "every fault kind has exactly one action"


def action(k: FaultKind | str) -> Action:
    return ACTIONS[k if isinstance(k, str) else k.name]


def supports(k: FaultKind | str, backend: object) -> bool:
    """Whether the backend can apply the kind (isolate needs a backend with networks)."""
    return action(k).supports(backend)
