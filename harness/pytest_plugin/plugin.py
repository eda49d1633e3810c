"""The pytest plugin (entry point `pytest11`, name `harness.pytest_plugin.plugin`): the conformance
catalog, fixtures for a team's own failover tests, JUnit properties and the HTML session report.

In any repository that installed the package:

    pytest --bfh-agent-cmd "my-agent --config {config} --workload {workload} --log {log}" -k masterslave

adds the catalog (harness/pytest_plugin/conformance/test_catalog.py, one item per catalog entry,
marked with its tags) to the session; `--bfh-scenarios a,b` restricts it to named entries,
`--bfh-catalog` adds it with the reference agent. `--bfh-agent-cmd-only` names the agent without
adding the catalog (this checkout's scenarios/test_catalog.py collects it itself). Every option is
`--bfh-*` with an ini twin (harness/pytest_plugin/options.py); the state of a session is in
config.stash, never in a module global.

This module is the entry point; its siblings register through `pytest_plugins`: options.py (the
options), workers.py (xdist's worker count), fixtures.py (`bfh_env`, `bfh_faults`, `bfh_judge`,
`reports_root`, `backend_kind`, `agent_cmd`, `scenario_record`, ...), reporting.py (the session
table and report), suite.py (which items a default run includes, longest first), scorecard.py (the session's
scorecard, and `--bfh-baseline`'s comparison).
The entry point and `-p harness.pytest_plugin.plugin` use the same plugin name, so pytest
registers it once whichever loads it first.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from harness.pytest_plugin.options import Settings

pytest_plugins = [
    "harness.pytest_plugin.options",
    "harness.pytest_plugin.workers",
    "harness.pytest_plugin.fixtures",
    "harness.pytest_plugin.reporting",
    "harness.pytest_plugin.suite",
    "harness.pytest_plugin.agentcheck",
    "harness.pytest_plugin.scorecard",
]
# added to the session as a folder, so its items are `test_catalog.py::test_scenario[NAME]`
CATALOG_DIR = Path(__file__).with_name("conformance")
_MARKERS = {
    "broker": "tests that start real ActiveMQ brokers",
    "spark": "tests that start a Spark session",
    "bfh_topology": "bfh_topology(name_or_file): the topology bfh_env brings up (default: pair)",
}


def settings(config: pytest.Config) -> Settings:
    # imported here: pytest_plugins (above) must import the sibling first, for assertion rewriting
    from harness.pytest_plugin.options import settings as read

    return read(config)


#: which of the plugin's own test modules this session collects
_MODULES = pytest.StashKey[dict[str, bool]]()


def _fleet_unasked(config: pytest.Config, entry: Any) -> bool:
    """Fleet entries run only when asked (`-k fleet`, `-m fleet`, --bfh-fleet, --bfh-scenarios):
    `-k masterslave` also matches `fleet-masterslave`, and the gate must not grow."""
    asked = f"{config.getoption('keyword') or ''} {config.getoption('markexpr') or ''}"
    return "fleet" in entry.tags and "fleet" not in asked and not settings(config).fleet


def pytest_configure(config: pytest.Config) -> None:
    from harness.catalog import scenarios as catalog

    s = settings(config)
    tags = sorted({t for sc in catalog.SCENARIOS.values() for t in sc.tags})
    for name, doc in {**{t: f"catalog entries tagged {t}" for t in tags}, **_MARKERS}.items():
        config.addinivalue_line("markers", f"{name}: {doc}")
    unknown = [n for n in s.scenarios if n not in catalog.SCENARIOS]
    if unknown:
        raise pytest.UsageError(f"--bfh-scenarios: unknown {unknown}; known: {', '.join(catalog.SCENARIOS)}")
    matrix = bool(s.topology)
    if matrix:
        _check_topology(config)
    # --bfh-topology alone runs only the matrix: the catalog comes too when asked for by name
    agent = s.agent_cmd and not matrix
    catalog_too = bool(agent or s.scenarios or s.catalog)
    config.stash[_MODULES] = {"test_topology.py": matrix, "test_catalog.py": catalog_too}
    if (matrix or catalog_too) and str(CATALOG_DIR) not in config.args:
        config.args.append(str(CATALOG_DIR))


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Of the plugin's own test modules, collect only those the options asked for."""
    if collection_path.parent != CATALOG_DIR or collection_path.suffix != ".py":
        return None
    return not config.stash.get(_MODULES, {}).get(collection_path.name, False)


def _check_topology(config: pytest.Config) -> None:
    """A bad --bfh-topology or --bfh-faults is a usage error before anything starts."""
    from harness.coverage import CoverageError, plan_rows
    from harness.topology import TopologyError, load_topology

    s = settings(config)
    try:
        plan_rows(load_topology(str(s.topology)), list(s.faults) if s.faults else None, None)
    except (TopologyError, CoverageError) as e:
        raise pytest.UsageError(f"--bfh-topology: {' '.join(str(e).split())}") from None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Drop catalog items collected twice (the plugin's module and a file importing its test, like
    this checkout's scenarios/test_catalog.py), then keep only the --bfh-scenarios entries."""
    seen: set[str] = set()
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    wanted = set(settings(config).scenarios)
    for item in items:
        fn = getattr(item, "function", None)
        where = (getattr(fn, "__module__", ""), getattr(fn, "__name__", ""))
        if where != ("harness.pytest_plugin.conformance.test_catalog", "test_scenario"):
            keep.append(item)
            continue
        entry = item.callspec.params["entry"]  # type: ignore[attr-defined]
        key = item.callspec.id  # type: ignore[attr-defined]
        if (
            key in seen
            or (wanted and entry.name not in wanted)
            or (not wanted and _fleet_unasked(config, entry))
        ):
            dropped.append(item)
            continue
        seen.add(key)
        keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
