"""`bfh demo`: the walking skeleton end to end on the embedded default.

A shared-KahaDB pair as local processes, a fault-proxy proxy per broker MQTT connector, the
reference agent (MQTT, QoS 1, durable) with `mb.urls` = the two proxies, kill -9 of the master
half-way, takeover, reconciliation and a summary table.
"""

from __future__ import annotations

from pathlib import Path

from harness.agents.launch import agent_factory
from harness.faults.schedule import Schedule, Step
from harness.report.console import print_summary
from harness.run.env import REPORTS
from harness.run.runner import console, execute
from harness.topology import builtin_topology


def run_demo(reports: Path = REPORTS, seed: int = 0) -> int:
    schedule = Schedule(seed=seed, steps=[Step(at=15.0, fault="kill", target="master:pair")], settle_s=10)
    result = execute(
        builtin_topology("pair"),
        agent_factory(group="pair", count=300, rate=10.0),
        schedule,
        label="demo",
        reports=reports,
    )
    assert result.summary is not None
    print_summary(result.summary)
    takeover = ", ".join(f"{t:.2f}s" for t in result.takeovers_s) or "none"
    console.print(f"run folder: {result.run_dir}")
    console.print(
        f"wall time {result.wall_s:.1f}s (without reconcile), takeover {takeover}, "
        f"reconcile {result.reconcile_s:.1f}s"
    )
    for err in result.nemesis_errors:
        console.print(f"[yellow]nemesis:[/] {err}")
    return 0 if result.summary.get("verdict") == "pass" else 1
