"""This checkout's own fixtures, and the deprecated unprefixed spellings of the plugin's options.
The options, the shared fixtures, the JUnit properties, the session table and report and the Spark
warm-up are the pytest plugin's (harness/pytest_plugin/), loaded by its entry point and by
`-p harness.pytest_plugin.plugin` in pyproject's addopts (a .venv without the entry point still gets
it; same name, so pytest registers it once)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.pytest_plugin.options import add_deprecated_alias, warn_deprecated
from harness.run.env import Environment, new_run_dir
from harness.topology import builtin_topology

#: this checkout's old spellings -> the plugin's options (the plugin itself declares only --bfh-*)
DEPRECATED_ALIASES = {
    "--agent-cmd": "--bfh-agent-cmd-only",  # names the agent without adding the catalog, as before
    "--backend": "--bfh-backend",
    "--reports": "--bfh-reports",
    "--gate": "--bfh-gate",
    "--agent-protocol": "--bfh-agent-protocol",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    for old, new in DEPRECATED_ALIASES.items():
        add_deprecated_alias(parser, old, new)


def pytest_configure(config: pytest.Config) -> None:
    warn_deprecated(config)


@pytest.fixture
def pair_env(reports_root: Path, backend_kind: str, request: pytest.FixtureRequest) -> Iterator[Environment]:
    """A started master/slave pair behind the fault proxy, in its own run folder."""
    run_id, run_dir = new_run_dir(reports_root, request.node.name[:40].replace("[", "-").replace("]", ""))
    with Environment.up(builtin_topology("pair"), run_dir, run_id, backend=backend_kind) as env:
        yield env


@pytest.fixture
def run_scenario(
    reports_root: Path,
    backend_kind: str,
    agent_cmd: str | None,
    bfh_agent_protocol: str | None,
    scenario_record: Any,
) -> Any:
    """Run one scenario end to end (real brokers, fault proxy, agent, Spark) and record its counts."""
    from scenarios.support import scenario_runner

    return scenario_runner(reports_root, backend_kind, agent_cmd, scenario_record, bfh_agent_protocol)
