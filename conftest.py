"""This checkout's own fixtures. The options, the shared fixtures, the JUnit properties, the session
table and report and the Spark warm-up are the pytest plugin's (harness/pytest_plugin/plugin.py), loaded
by its entry point and by `-p harness.pytest_plugin.plugin` in pyproject's addopts (a .venv without the
entry point still gets it; same name, so pytest registers it once)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.run.env import Environment, new_run_dir
from harness.topology import builtin_topology


@pytest.fixture
def pair_env(reports_root: Path, backend_kind: str, request: pytest.FixtureRequest) -> Iterator[Environment]:
    """A started master/slave pair behind the fault proxy, in its own run folder."""
    run_id, run_dir = new_run_dir(reports_root, request.node.name[:40].replace("[", "-").replace("]", ""))
    with Environment.up(builtin_topology("pair"), run_dir, run_id, backend=backend_kind) as env:
        yield env


@pytest.fixture
def run_scenario(reports_root: Path, backend_kind: str, agent_cmd: str | None, scenario_record: Any) -> Any:
    """Run one scenario end to end (real brokers, fault proxy, agent, Spark) and record its counts."""
    from scenarios.support import scenario_runner

    return scenario_runner(reports_root, backend_kind, agent_cmd, scenario_record)
