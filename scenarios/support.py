"""Helpers the scenarios share: run a catalog entry, assert its verdict, read a run's logs.

The verdict is harness.verdict's; nothing here decides pass or fail on its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.contracts.faultlog import Window, read_windows
from harness.contracts.msglog import iter_records
from harness.pytest_plugin.conformance.test_catalog import (
    assert_verdict,  # noqa: F401  # the plugin's, for the scenarios
)


def run_defect(sc: Any, defect: str, reports_root: Path, backend: str, record: Any, label: str) -> Any:
    """Run a catalog entry with a seeded-defect agent; the judged RunResult (its verdict printed)."""
    from agent_under_test.defects import command as defect_command
    from harness.catalog import scenarios as catalog

    out = catalog.run(
        sc,
        catalog.topology_named(sc.topology),
        agent_cmd=defect_command(defect),
        reports=reports_root,
        backend=backend,
        show_progress=False,
        label=label,
    )
    record(out.result)
    assert out.result.verdict is not None, f"{label}: not judged; {out.result.run_dir}"
    print(out.result.verdict.message(label))
    return out.result


def agent_records(run_dir: Path, event: str | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for log in sorted((run_dir / "agents").glob("*/messages.jsonl")):
        out += [r for r in iter_records(log) if event is None or r.get("event") == event]
    return out


def fault_windows(run_dir: Path, fault: str | None = None) -> list[Window]:
    """The run's fault windows (harness.contracts.faultlog), in start order; only `fault`'s when given."""
    windows = read_windows(run_dir / "faults.jsonl").windows
    return [w for w in windows if fault is None or w.fault == fault]


def received_after(run_dir: Path, fault: str) -> list[dict[str, Any]]:
    """Receipts after the first window of `fault` ended (the agent recovered)."""
    ends = [w.end for w in fault_windows(run_dir, fault) if w.end is not None]
    assert ends, f"no {fault} fault ended in {run_dir}"
    return [r for r in agent_records(run_dir, "received") if r["ts"] > ends[0]]


def scenario_runner(
    reports_root: Path, backend: str, agent_cmd: str | None, record: Any, agent_protocol: str | None = None
) -> Any:
    """A `run(topology, schedule, label, **agent_kw)` callable for ad-hoc scenarios (docker tests).

    `agent_cmd` (pytest --bfh-agent-cmd-only) replaces the reference agent, speaking
    `agent_protocol` (--bfh-agent-protocol) when given; `agents=` takes a factory.
    """
    from harness.agents.launch import agent_factory
    from harness.catalog.scenarios import POLICY
    from harness.run.runner import execute

    def run(topology: Any, schedule: Any, label: str, agents: Any = None, **agent_kw: Any) -> Any:
        if agent_cmd and "command" not in agent_kw:
            agent_kw["command"] = agent_cmd
            if agent_protocol:
                agent_kw.setdefault("command_protocol", agent_protocol)
        result = execute(
            topology,
            agents if agents is not None else agent_factory(**agent_kw),
            schedule,
            label=label,
            reports=reports_root,
            backend=backend,
            show_progress=False,
            policy=POLICY,
        )
        record(result)
        return result

    run.agent_cmd = agent_cmd  # type: ignore[attr-defined]
    return run
