"""A topology's coverage matrix as pytest items (`pytest --bfh-topology FILE`, added by the plugin):
one test per fault row, each with every traffic family on every delivery path; a failure names
every broken path x family with its counts and what the prediction says blocks it, then the run's
other broken promises (harness.coverage)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from harness.coverage import RunOptions, failure_message, run_row
from harness.pytest_plugin.scorecard import RUN_DIRS


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "bfh_row" not in metafunc.fixturenames:
        return
    from harness.coverage import plan_rows
    from harness.pytest_plugin.options import settings
    from harness.topology import load_topology

    s = settings(metafunc.config)
    opt = s.topology
    if not opt:  # collected by path without the option: nothing to validate
        metafunc.parametrize(
            "bfh_row", [pytest.param(None, marks=pytest.mark.skip(reason="give --bfh-topology"))]
        )
        return
    topology = load_topology(opt)
    rows = plan_rows(topology, list(s.faults) if s.faults else None, None)
    metafunc.parametrize(
        "bfh_row",
        [pytest.param((topology, r), id=r.key, marks=[pytest.mark.broker, pytest.mark.spark]) for r in rows],
    )


def test_topology_row(
    bfh_row: Any,
    reports_root: Any,
    backend_kind: str,
    agent_cmd: str | None,
    bfh_agent_protocol: str | None,
    bfh_fleet: int | None,
    record_property: Callable[[str, object], None],
) -> None:
    """Promise: every family on every path the topology requires delivers under this fault, and every
    gated promise holds."""
    topology, row = bfh_row
    opts = RunOptions(
        agent_cmd=agent_cmd,
        reports=reports_root,
        backend=backend_kind,
        fleet=bfh_fleet,
        agent_protocol=bfh_agent_protocol,
    )
    r = run_row(topology, row, opts)
    if r.run_dir is not None:  # the session's scorecard (harness/pytest_plugin/scorecard.py)
        record_property(RUN_DIRS, json.dumps([str(r.run_dir)]))
    assert r.verdict != "fail", failure_message(r)
