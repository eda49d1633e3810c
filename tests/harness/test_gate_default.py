"""The default gate (issue 42 item 5): `bfh run` judges an agent, so `agent` whichever agent runs
(the reference or --agent-cmd); pytest: `agent` when an agent is gated (--bfh-agent-cmd /
--bfh-agent-cmd-only), `all` for the reference agent's catalog and for a topology's validation
(--bfh-topology, `bfh validate`); an explicit gate always wins."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.cli.parser import build_parser
from harness.pytest_plugin.options import _gate
from harness.verdict.races import run_gate

from .pluginproject import run_pytest, write_project

SHOW = {
    "pytest.ini": "[pytest]\n",
    "scenarios/test_show.py": "def test_show(bfh_gate):\n    print('SHOW', bfh_gate)\n",
}


def _shown(project: Path, *args: str) -> str:
    p: subprocess.CompletedProcess[str] = run_pytest(
        project, "-p", "no:cacheprovider", "-n", "0", "-s", *args
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return next(ln for ln in p.stdout.splitlines() if "SHOW " in ln).split("SHOW ", 1)[1].strip()


def test_plugin_gate_follows_the_agent_command(tmp_path: Path) -> None:
    project = write_project(tmp_path, SHOW)
    assert _shown(project) == "all"  # the reference agent
    agent = ("--bfh-agent-cmd-only", "my-agent --config {config} --workload {workload} --log {log}")
    assert _shown(project, *agent) == "agent"
    assert _shown(project, *agent, "--bfh-gate", "all") == "all"  # the strict gate kept on demand
    (project / "pytest.ini").write_text("[pytest]\nbfh_gate = all\n")
    assert _shown(project, *agent) == "all"  # the ini twin counts as asked


@pytest.mark.parametrize(
    ("gate", "agent", "topology", "expected"),
    [
        (None, None, None, "all"),
        (None, "a {config}", None, "agent"),
        (None, "a {config}", "pair", "all"),  # validating a topology: the broker is under test
        ("all", "a {config}", None, "all"),
        ("agent", None, "pair", "agent"),
    ],
)
def test_plugin_gate_choice(gate, agent, topology, expected) -> None:
    assert _gate(gate, agent, topology) == expected


def test_bfh_run_gates_the_agent_it_runs_on_its_own_losses() -> None:
    p = build_parser()
    run = p.parse_args(["run", "masterslave", "--agent-cmd", "a {config}"])
    assert run_gate(run.gate) == "agent"
    strict = p.parse_args(["run", "masterslave", "--agent-cmd", "a {config}", "--gate", "all"])
    assert run_gate(strict.gate) == "all"
    reference = p.parse_args(["run", "fleet-masterslave", "--fleet", "100"])
    assert run_gate(reference.gate) == "agent"  # the reference agent is judged too: a race warns
    assert run_gate(p.parse_args(["run", "masterslave", "--gate", "all"]).gate) == "all"
    # bfh validate passes its --gate as given: None is the catalog's own default, `all`
    assert p.parse_args(["validate", "pair", "--agent-cmd", "a {config}"]).gate is None
