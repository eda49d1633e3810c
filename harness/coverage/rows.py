"""The faults a topology's validation runs: the baseline, then per group and per bridge, as data.

Each row is one run with traffic on every path at once. `rank` orders the rows for a budget:
baseline, then each group's master kill, then the bridges, then the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.faults.schedule import Step
from harness.topology import Topology

#: fault names for --faults (a row's `fault`)
GROUP_FAULTS = ("kill", "stop", "pause", "slave-loss", "rolling-restart", "both-down")
BRIDGE_FAULTS = ("bridge-blackhole", "bridge-cut", "bridge-handshake")
FAULTS = ("baseline", *GROUP_FAULTS, *BRIDGE_FAULTS)


@dataclass(frozen=True)
class Row:
    key: str  # unique in a validation: "kill:hub", "bridge-cut:east->hub"
    fault: str  # one of FAULTS
    what: str
    target: str | None  # the group or the bridge ("east->hub"); None for the baseline
    steps: tuple[Step, ...] = ()
    count: int = 100  # messages each group's publisher sends
    rate: float = 10.0
    timeout_s: int = 900  # mb.publisher.timeout
    rank: int = 9
    params: dict[str, Any] = field(default_factory=dict)


def _s(at: float, fault: str, target: str, duration: float | None = None, **params: Any) -> Step:
    return Step(at=at, fault=fault, target=target, duration=duration, params=params)


def _row(fault: str, target: str, what: str, *steps: Step, count: int = 100, **kw: Any) -> Row:
    """A fault row keyed "<fault>:<target>"."""
    return Row(f"{fault}:{target}", fault, what, target, steps, count, **kw)


def group_rows(g: str, size: int) -> list[Row]:
    m = f"master:{g}"
    both_down = f"members:{g}"
    if size == 1:  # a standalone broker: no takeover; it can only come back
        return [
            _row("pause", g, f"{g}: SIGSTOP the broker 10 s", _s(4, "pause", m, 10), count=150, rank=3),
            _row(
                "both-down",
                g,
                f"{g}: the broker down 8 s, less than mb.publisher.timeout (40 s)",
                _s(4, "kill", both_down, 8),
                timeout_s=40,
                rank=1,
            ),
        ]
    return [
        _row("kill", g, f"{g}: kill -9 the master", _s(5, "kill", m), rank=1),
        _row("stop", g, f"{g}: graceful stop of the master", _s(5, "stop", m), rank=3),
        _row("pause", g, f"{g}: SIGSTOP the master 20 s", _s(4, "pause", m, 20), count=150, rank=3),
        _row(
            "slave-loss",
            g,
            f"{g}: kill -9 the slave (nothing may notice), back after 10 s",
            _s(4, "kill", f"slave:{g}", 10),
            rank=4,
        ),
        _row(
            "rolling-restart",
            g,
            f"{g}: rolling restart: restart the slave, stop the master (the slave takes over), "
            "the old master back as slave",
            _s(3, "restart", f"slave:{g}"),
            _s(10, "stop", m, 6),
            count=200,
            rank=4,
        ),
        _row(
            "both-down",
            g,
            f"{g}: both members down 8 s, less than mb.publisher.timeout (40 s)",
            _s(4, "kill", both_down, 8),
            timeout_s=40,
            rank=4,
        ),
    ]


def bridge_rows(src: str, dst: str) -> list[Row]:
    b = f"{src}->{dst}"
    t = f"bridge:{b}"
    return [
        _row(
            "bridge-blackhole",
            b,
            f"bridge {src} → {dst} black-holed 20 s",
            _s(4, "partition", t, 20),
            count=250,
            rank=2,
        ),
        _row(
            "bridge-cut",
            b,
            f"bridge {src} → {dst}: connections cut and refused 10 s",
            _s(4, "down", t, 10),
            count=150,
            rank=2,
        ),
        _row(
            "bridge-handshake",
            b,
            f"bridge {src} → {dst}: kill -9 {dst}'s master, the bridge's connections cut after 300 bytes "
            "(in the handshake) for 15 s after the takeover",
            _s(5, "kill", f"master:{dst}"),
            _s(5, "limit_data", t, 15, bytes=300),
            count=200,
            rank=4,
        ),
    ]


def rows_for(topology: Topology, faults: set[str] | None = None, groups: set[str] | None = None) -> list[Row]:
    """Every row of the topology, baseline first, ordered by what it covers (a budget's order)."""
    rows = [Row("baseline", "baseline", "no fault: traffic on every path", None, rank=0)]
    for g in topology.groups:
        rows += group_rows(g.name, g.size)
    seen: set[tuple[str, str]] = set()
    for br in topology.bridges:
        if (br.source, br.target) not in seen and br.uri != "multicast":
            seen.add((br.source, br.target))
            rows += bridge_rows(br.source, br.target)
    if faults:
        rows = [r for r in rows if r.fault in faults or r.fault == "baseline"]
    if groups:
        rows = [r for r in rows if r.target is None or set(_groups_of(r)) & groups]
    return sorted(rows, key=lambda r: r.rank)  # stable: group order within a rank


def _groups_of(r: Row) -> list[str]:
    return (r.target or "").split("->")
