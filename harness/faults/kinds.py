"""The fault vocabulary as data: every fault kind the harness applies, one record each.

A kind has its name, what a target names (`on`), its parameters (a pydantic model: validation and
defaults in one place) and the flags the rest reads: the verdict (`outage`, `heal`, `cuts`, through
`logged_names`), the schedule validator (`schedulable`), generated chaos (`chaos`, `ends_itself`,
`heals_by`) and the docs' table (`markdown_table`). How a kind is applied and healed is its action
(harness/faults/actions.py); this module imports nothing of the harness, so the verdict reading a
flag pulls in no backend or proxy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError


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
    hold_ms: int = Field(0, ge=0, description="hold what follows that long, no close (builtin proxy)")


class SeverParams(Params):
    gap_s: float = Field(3.0, ge=0, description="seconds between two cuts")


class FaultParamsError(ValueError):
    """Parameters a kind does not take, or out of range; the message names each."""


@dataclass(frozen=True)
class FaultKind:
    name: str
    on: str  # "broker" or "link": what a target names
    doc: str
    heals_by: str | None  # how it heals; None: nothing is left to heal once it started
    params_model: type[Params] = NoParams
    outage: bool = False  # the target serves no client while the window lasts
    heal: bool = False  # the window brings a broker back: a heal, not a fault
    cuts: bool = False  # traffic across the target is cut: what it carries is the fault's
    ends_itself: bool = False  # the window ends on its own; a duration brings the target back
    schedulable: bool = True
    chaos: bool = True  # generated chaos (scenarios/chaos.py) draws it on a pair
    aliases: tuple[str, ...] = ()  # names older runs logged it under

    def parse(self, params: Mapping[str, Any] | Params | None = None) -> Params:
        if isinstance(params, self.params_model):
            return params
        try:
            return self.params_model.model_validate(dict(params or {}))
        except ValidationError as e:
            details = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors())
            raise FaultParamsError(f"{self.name}: {details}") from None


_DOWN = "started again after the duration (or by the final heal)"
_LINK_HEAL = "toxics removed, link enabled"

# this order: the docs table, and chaos draws (reproducible)
_ALL = [
    # -- broker faults
    FaultKind("kill", "broker", "kill -9 the broker", _DOWN, TakeoverParams, outage=True, ends_itself=True),
    FaultKind(
        "stop", "broker", "stop the broker gracefully", _DOWN, TakeoverParams, outage=True, ends_itself=True
    ),
    FaultKind(
        "pause", "broker", "SIGSTOP the broker (it keeps the store lock)", "resumed (SIGCONT)", outage=True
    ),
    FaultKind("restart", "broker", "kill the broker if it runs, then start it", None),
    FaultKind(
        "isolate",
        "broker",
        "disconnect the broker from its network: clients and bridges cut, store lock kept (Docker backend)",
        "reconnected",
        outage=True,
        cuts=True,
        chaos=False,  # the local backend has no networks
    ),
    FaultKind(
        "start",
        "broker",
        "start a stopped or killed member again: the heal of a kill or stop, never scheduled",
        None,
        heal=True,
        schedulable=False,
        chaos=False,
    ),
    # -- link faults (through the fault proxy)
    FaultKind(
        "down",
        "link",
        "disable links: new connections refused, open ones closed",
        _LINK_HEAL,
        outage=True,
        cuts=True,
        aliases=("link_down",),
    ),
    FaultKind(
        "partition",
        "link",
        "black hole both ways (timeout 0): the peers see no close, only silence",
        _LINK_HEAL,
        outage=True,
        cuts=True,
    ),
    FaultKind("latency", "link", "delay each chunk by latency ± jitter", _LINK_HEAL, LatencyParams),
    FaultKind(
        "reset_peer",
        "link",
        "reset connections (RST) on their first data, after timeout_ms",
        _LINK_HEAL,
        ResetPeerParams,
    ),
    FaultKind("slicer", "link", "cut data into small pieces, delay_us apart", _LINK_HEAL, SlicerParams),
    FaultKind("bandwidth", "link", "cap the rate at rate_kbps", _LINK_HEAL, BandwidthParams),
    FaultKind(
        "limit_data",
        "link",
        "pass that many bytes per connection, then close it (`hold_ms` > 0, the builtin fault proxy "
        "only: hold what follows that long, then pass it on)",
        _LINK_HEAL,
        LimitDataParams,
        chaos=False,  # every reconnect is closed again: an outage the chaos property does not model
    ),
    FaultKind(
        "sever",
        "link",
        "abort the established client connections of the links one at a time, gap_s apart",
        None,
        SeverParams,
        chaos=False,  # blocks its step for gap_s per connection
    ),
]
KINDS: dict[str, FaultKind] = {k.name: k for k in _ALL}


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
