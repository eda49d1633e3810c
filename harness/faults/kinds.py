"""The fault vocabulary: every fault kind the harness applies, one object each (as Jepsen's nemeses).

A kind has its parameters (a pydantic model: validation and defaults in one place), `start(faults,
targets, params) -> Handle`, `stop(faults, handle)` and `undo(faults, window)`: how one open window
heals, used by `stop` and by `Faults.heal_all`. Each kind is logged to faults.jsonl under its own
name. The schedule validator, the nemesis, the chaos strategies, the verdict (the `outage` and
`heal` flags) and the docs' table (`markdown_table`) all read `KINDS`.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

if TYPE_CHECKING:
    from harness.backends.base import SupportsIsolate
    from harness.faults.apply import Faults, OpenWindow

LOOPBACK = "127.0.0.1"  # where the fault proxy listens (harness.deploy.plan.HOST)


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NoParams(Params):
    pass


class TakeoverParams(Params):
    wait_takeover: bool = Field(True, description="end the window when the group serves again (one target)")
    timeout_s: float = Field(60.0, gt=0, description="how long to wait for the takeover")


class LatencyParams(Params):
    latency_ms: int = Field(500, ge=0)
    jitter_ms: int = Field(0, ge=0)


class BandwidthParams(Params):
    rate_kbps: int = Field(16, ge=0)


class ResetPeerParams(Params):
    timeout_ms: int = Field(0, ge=0)


class SlicerParams(Params):
    average_size: int = Field(64, ge=1)
    size_variation: int = Field(32, ge=0)
    delay_us: int = Field(100, ge=0)


class LimitDataParams(Params):
    bytes: int = Field(4096, ge=0)


class SeverParams(Params):
    gap_s: float = Field(3.0, ge=0, description="seconds between two cuts")


class FaultParamsError(ValueError):
    """Parameters a kind does not take, or out of range; the message names each."""


@dataclass
class Handle:
    """A started fault: the windows `stop` closes, and what the start measured."""

    kind: str
    targets: list[str]
    params: Params
    windows: list[str] = field(default_factory=list)  # fault ids still open
    results: dict[str, Any] = field(default_factory=dict)  # takeover_s per broker, cuts per link


class FaultKind:
    name: ClassVar[str]
    on: ClassVar[str]  # "broker" or "link": what a target names
    doc: ClassVar[str]
    heals_by: ClassVar[str | None]  # how it heals; None: nothing is left to heal once it started
    params_model: ClassVar[type[Params]] = NoParams
    outage: ClassVar[bool] = False  # the target serves no client while the window lasts
    heal: ClassVar[bool] = False  # the window brings a broker back: a heal, not a fault
    cuts: ClassVar[bool] = False  # traffic across the target is cut: what it carries is the fault's
    ends_itself: ClassVar[bool] = False  # the window ends on its own; a duration brings the target back
    schedulable: ClassVar[bool] = True
    chaos: ClassVar[bool] = True  # generated chaos (scenarios/chaos.py) draws it on a pair
    aliases: ClassVar[tuple[str, ...]] = ()  # names older runs logged it under

    def parse(self, params: Mapping[str, Any] | Params | None = None) -> Params:
        if isinstance(params, self.params_model):
            return params
        try:
            return self.params_model.model_validate(dict(params or {}))
        except ValidationError as e:
            details = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors())
            raise FaultParamsError(f"{self.name}: {details}") from None

    def supports(self, backend: object) -> bool:
        return True

    def logged(self, params: Params) -> dict[str, Any]:
        """The params written to the fault log."""
        return params.model_dump()

    def start(self, faults: Faults, targets: list[str], params: Params) -> Handle:
        raise NotImplementedError

    def stop(self, faults: Faults, handle: Handle) -> None:
        for fid in handle.windows:
            window = faults.window(fid)
            if window is not None:
                self.undo(faults, window)
                faults.end(fid)

    def undo(self, faults: Faults, window: OpenWindow) -> None:
        """Heal one open window of this kind (nothing by default)."""


# -- broker faults -------------------------------------------------------------------------------
class _OnBroker(FaultKind):
    on = "broker"

    def logged(self, params: Params) -> dict[str, Any]:
        return {}

    def begin(self, faults: Faults, broker: str) -> str:
        return faults.begin(self.name, broker, {"group": faults.group_of(broker)})


class _Down(_OnBroker):
    """kill/stop: the window ends when the group serves again; `stop` starts the broker again."""

    params_model = TakeoverParams
    outage = True
    ends_itself = True
    heals_by = "started again after the duration (or by the final heal)"

    def act(self, faults: Faults, broker: str) -> None:
        raise NotImplementedError

    def start(self, faults: Faults, targets: list[str], params: Params) -> Handle:
        assert isinstance(params, TakeoverParams)
        handle = Handle(self.name, targets, params)
        wait = params.wait_takeover and len(targets) == 1

        def one(broker: str) -> None:
            group = faults.group_of(broker)
            fid = self.begin(faults, broker)
            t0 = time.monotonic()
            self.act(faults, broker)
            if not wait:
                faults.end(fid)
                return
            new_master = faults.backend.wait_master(group, params.timeout_s)
            took = time.monotonic() - t0
            faults.end(fid, new_master=new_master, takeover_s=round(took, 3))
            handle.results[broker] = took

        _each_at_once(one, targets)
        return handle

    def stop(self, faults: Faults, handle: Handle) -> None:
        for broker in handle.targets:
            if not faults.backend.alive(broker):
                faults.start(START, broker)


class Kill(_Down):
    name = "kill"
    doc = "kill -9 the broker"

    def act(self, faults: Faults, broker: str) -> None:
        faults.backend.kill(broker)


class Stop(_Down):
    name = "stop"
    doc = "stop the broker gracefully"

    def act(self, faults: Faults, broker: str) -> None:
        faults.backend.stop(broker)


class Pause(_OnBroker):
    name = "pause"
    doc = "SIGSTOP the broker (it keeps the store lock)"
    heals_by = "resumed (SIGCONT)"
    outage = True

    def start(self, faults: Faults, targets: list[str], params: Params) -> Handle:
        handle = Handle(self.name, targets, params)
        for broker in targets:
            handle.windows.append(self.begin(faults, broker))
            faults.backend.pause(broker)
        return handle

    def undo(self, faults: Faults, window: OpenWindow) -> None:
        if faults.backend.alive(window.target):
            faults.backend.resume(window.target)


class Restart(_OnBroker):
    name = "restart"
    doc = "kill the broker if it runs, then start it"
    heals_by = None

    def start(self, faults: Faults, targets: list[str], params: Params) -> Handle:
        for broker in targets:
            fid = self.begin(faults, broker)
            faults.backend.restart(broker)
            faults.end(fid)
        return Handle(self.name, targets, params)


class Isolate(_OnBroker):
    name = "isolate"
    doc = "disconnect the broker from its network: clients and bridges cut, store lock kept (Docker backend)"
    heals_by = "reconnected"
    outage = True
    cuts = True
    chaos = False  # the local backend has no networks

    def supports(self, backend: object) -> bool:
        return _isolating(backend) is not None

    def start(self, faults: Faults, targets: list[str], params: Params) -> Handle:
        backend = _isolating(faults.backend)
        if backend is None:
            raise faults.unsupported(self)
        handle = Handle(self.name, targets, params)
        for broker in targets:
            handle.windows.append(self.begin(faults, broker))
            backend.isolate(broker)
        return handle

    def undo(self, faults: Faults, window: OpenWindow) -> None:
        backend = _isolating(faults.backend)
        if backend is not None and faults.backend.alive(window.target):
            backend.reconnect(window.target)


class Start(_OnBroker):
    name = "start"
    doc = "start a stopped or killed member again: the heal of a kill or stop, never scheduled"
    heals_by = None
    heal = True
    schedulable = False
    chaos = False

    def start(self, faults: Faults, targets: list[str], params: Params) -> Handle:
        for broker in targets:
            fid = self.begin(faults, broker)
            faults.backend.start_broker(broker)
            faults.end(fid)
        return Handle(self.name, targets, params)


def _isolating(backend: object) -> SupportsIsolate | None:
    """The backend if it can cut a broker off its network (isolate/reconnect), else None."""
    from harness.backends.base import SupportsIsolate  # at call time: the vocabulary imports no backend

    return backend if isinstance(backend, SupportsIsolate) else None


# -- link faults (through the fault proxy) -------------------------------------------------------
class _OnLinks(FaultKind):
    """One window over every link of the targets; healed by removing the toxics and enabling."""

    on = "link"
    heals_by = "toxics removed, link enabled"

    def apply(self, faults: Faults, link: str, params: Params) -> None:
        raise NotImplementedError

    def start(self, faults: Faults, targets: list[str], params: Params) -> Handle:
        names = faults.link_names(targets)
        fid = faults.begin(self.name, ",".join(targets), self.logged(params), names)
        for n in names:
            self.apply(faults, n, params)
        return Handle(self.name, targets, params, [fid])

    def undo(self, faults: Faults, window: OpenWindow) -> None:
        for n in window.links:
            faults.proxy.heal(n)
        faults.release_links(window.links)  # heal() enabled them: let the mirror re-check


class LinkDown(_OnLinks):
    name = "down"
    doc = "disable links: new connections refused, open ones closed"
    outage = True
    cuts = True
    aliases = ("link_down",)

    def start(self, faults: Faults, targets: list[str], params: Params) -> Handle:
        faults.hold_links(faults.link_names(targets))  # the mirror must not re-enable them mid-fault
        return super().start(faults, targets, params)

    def apply(self, faults: Faults, link: str, params: Params) -> None:
        faults.proxy.disable(link)


class Partition(_OnLinks):
    name = "partition"
    doc = "black hole both ways (timeout 0): the peers see no close, only silence"
    outage = True
    cuts = True

    def apply(self, faults: Faults, link: str, params: Params) -> None:
        faults.proxy.black_hole(link)


class Latency(_OnLinks):
    name = "latency"
    doc = "delay each chunk by latency ± jitter"
    params_model = LatencyParams

    def apply(self, faults: Faults, link: str, params: Params) -> None:
        assert isinstance(params, LatencyParams)
        faults.proxy.latency(link, params.latency_ms, params.jitter_ms)


class ResetPeer(_OnLinks):
    name = "reset_peer"
    doc = "reset connections (RST) on their first data, after timeout_ms"
    params_model = ResetPeerParams

    def apply(self, faults: Faults, link: str, params: Params) -> None:
        assert isinstance(params, ResetPeerParams)
        faults.proxy.reset_peer(link, params.timeout_ms)


class Slicer(_OnLinks):
    name = "slicer"
    doc = "cut data into small pieces, delay_us apart"
    params_model = SlicerParams

    def apply(self, faults: Faults, link: str, params: Params) -> None:
        assert isinstance(params, SlicerParams)
        faults.proxy.slice(link, params.average_size, params.size_variation, params.delay_us)


class Bandwidth(_OnLinks):
    name = "bandwidth"
    doc = "cap the rate at rate_kbps"
    params_model = BandwidthParams

    def apply(self, faults: Faults, link: str, params: Params) -> None:
        assert isinstance(params, BandwidthParams)
        faults.proxy.bandwidth(link, params.rate_kbps)


class LimitData(_OnLinks):
    name = "limit_data"
    doc = "pass that many bytes per connection, then close it"
    params_model = LimitDataParams
    chaos = False  # every reconnect is closed again: an outage the chaos property does not model

    def apply(self, faults: Faults, link: str, params: Params) -> None:
        assert isinstance(params, LimitDataParams)
        faults.proxy.limit(link, params.bytes)


class Sever(FaultKind):
    """Each cut is its own window, so the verdict sees which roles each cut disturbed; uses the
    kernel's socket destroy (`ss -K`), so any agent and any fault proxy work."""

    name = "sever"
    on = "link"
    doc = "abort the established client connections of the links one at a time, gap_s apart"
    heals_by = None
    params_model = SeverParams
    chaos = False  # blocks its step for gap_s per connection

    def logged(self, params: Params) -> dict[str, Any]:
        return {}

    def start(self, faults: Faults, targets: list[str], params: Params) -> Handle:
        assert isinstance(params, SeverParams)
        handle = Handle(self.name, targets, params)
        for target in targets:
            cut = 0
            for link in faults.links(target):
                for sport in established_client_ports(link.listen_port):
                    fid = faults.begin(self.name, link.name, {"client_port": sport})
                    subprocess.run(
                        [
                            "ss",
                            "-K",
                            "dst",
                            LOOPBACK,
                            "dport",
                            "=",
                            str(link.listen_port),
                            "sport",
                            "=",
                            str(sport),
                        ],
                        capture_output=True,
                        check=False,
                    )
                    cut += 1
                    time.sleep(params.gap_s)
                    faults.end(fid)
            handle.results[target] = cut
        return handle


def established_client_ports(listen_port: int) -> list[int]:
    """Local ports of the client sockets connected to a proxy listen port."""
    out = subprocess.run(
        ["ss", "-tnH", "state", "established", "dst", f"{LOOPBACK}:{listen_port}"],
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


# -- the registry ----------------------------------------------------------------------------------
START = Start()
_BROKER: list[FaultKind] = [Kill(), Stop(), Pause(), Restart(), Isolate(), START]
_LINK: list[FaultKind] = [
    LinkDown(),
    Partition(),
    Latency(),
    ResetPeer(),
    Slicer(),
    Bandwidth(),
    LimitData(),
    Sever(),
]
KINDS: dict[str, FaultKind] = {k.name: k for k in _BROKER + _LINK}  # this order: docs table, chaos draws


def kind(name: str | FaultKind) -> FaultKind:
    if isinstance(name, FaultKind):
        return name
    try:
        return KINDS[name]
    except KeyError:
        raise FaultParamsError(f"unknown fault {name!r}; known: {', '.join(KINDS)}") from None


def schedulable() -> list[str]:
    return [k.name for k in KINDS.values() if k.schedulable]


def logged_names(flag: str) -> frozenset[str]:
    """Every name a kind with `flag` set (`outage`, `heal`, `cuts`) was ever logged under."""
    return frozenset(n for k in KINDS.values() if getattr(k, flag) for n in (k.name, *k.aliases))


def markdown_table() -> str:
    """The table of fault kinds in docs/scenarios.md (a test keeps the two equal)."""

    def params(k: FaultKind) -> str:
        fields = k.params_model.model_fields
        return ", ".join(f"`{n}`: {json.dumps(f.default)}" for n, f in fields.items()) or "–"

    rows = [
        "| fault | on | params (defaults) | does | heals by | an outage to the verdict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for k in KINDS.values():
        name = f"`{k.name}`" + ("" if k.schedulable else " (logged only)")
        rows.append(
            f"| {name} | {k.on} | {params(k)} | {k.doc} | {k.heals_by or '–'} | {'yes' if k.outage else ''} |"
        )
    return "\n".join(rows) + "\n"
