"""A role that never connects while a member serves is the agent's broken promise (issue 35).

The pinned replay file `schedules/pause-master-at-start.json` pauses the master as the publisher
starts: the paused master answers nothing and holds the store lock, so no member serves until it
thaws. A publisher-only agent starts after the subscriptions, so its first pass falls inside the
pause. The reference retries and connects after the thaw; `gives_up_first_pass` never does and
must be named for `connect_timeout`, not `non_vacuous` (emptiness the harness caused).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_under_test.defects import command as defect_command
from harness.agents.launch import agent_factory, combine
from harness.catalog.scenarios import POLICY
from harness.faults.schedule import load_schedule
from harness.run.runner import execute
from harness.topology import builtin_topology
from harness.verdict import DEFAULT_GATES

SCHEDULE = Path(__file__).parent / "schedules" / "pause-master-at-start.json"


def _run(command: str | None, reports_root: Path, backend: str, label: str):
    agents = combine(
        agent_factory(name="sub", group="pair", count=0, timeout_s=6, command=command),
        agent_factory(name="pub", group="pair", subscriptions=(), count=240, timeout_s=6, command=command),
    )
    return execute(
        builtin_topology("pair"),
        agents,
        load_schedule(SCHEDULE),
        label=label,
        reports=reports_root,
        backend=backend,
        show_progress=False,
        policy=POLICY,
        scenario={"name": "pause-master-at-start", "gates": list(DEFAULT_GATES), "params": {}},
    )


@pytest.mark.verdict_power
@pytest.mark.broker
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("agent", ["reference", "gives_up_first_pass"])
def test_publisher_that_never_connects_is_named(agent, reports_root, backend_kind, record_property):
    """Promise: a publisher that gives up after its first failed pass is named for connect_timeout
    (with its evidence); the reference agent on the same schedule is not."""
    command = None if agent == "reference" else defect_command(agent)
    r = _run(command, reports_root, backend_kind, f"never-connects-{agent}")
    assert r.verdict is not None, f"not judged: {r.run_dir}"
    broken = set(r.verdict.broken)
    record_property("named", ",".join(sorted(broken)))
    check = r.verdict.check("connect_timeout")
    if agent == "reference":
        assert check.status != "fail", r.verdict.message(agent)
        assert "non_vacuous" not in broken, r.verdict.message(agent)
        return
    assert "connect_timeout" in broken, r.verdict.message(agent)
    assert "non_vacuous" not in broken, r.verdict.message(agent)
    assert any(e.get("role") == "publisher" and "never connected" in e["what"] for e in check.evidence), (
        r.verdict.message(agent)
    )
