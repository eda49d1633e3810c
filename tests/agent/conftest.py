"""Fixtures for the agent tests: one master/slave pair per module, healed between tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.run.env import Environment, new_run_dir
from harness.topology import builtin_topology


@pytest.fixture(scope="module")
def pair(reports_root: Path, backend_kind: str, request: pytest.FixtureRequest) -> Iterator[Environment]:
    """A shared-store pair (mqtt, stomp, openwire) behind the fault proxy, shared by a module.

    Tests leave it serving: after a test, every stopped member is started again (as slave) and
    every link fault is healed.
    """
    label = "agent-" + request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")[:30]
    run_id, run_dir = new_run_dir(reports_root, label)
    with Environment.up(builtin_topology("pair"), run_dir, run_id, backend=backend_kind) as env:
        yield env


@pytest.fixture
def healthy_pair(pair: Environment) -> Iterator[Environment]:
    yield pair
    pair.faults.heal_all()
    for name in pair.plan.brokers:
        if not pair.backend.alive(name):
            pair.backend.start_broker(name)
    pair.backend.wait_master("pair", 60)
