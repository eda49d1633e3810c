"""Fleet verdict power (docs/fleet.md): the lock-step defect agent, 20 of them on one pair with the
master killed, is named for `reconnect_storm`; the reference fleet of the same size is not.
Extended tier (two fleet runs of ~2 min each on two cores)."""

from __future__ import annotations

import pytest

from agent_under_test.defects import command as defect_command
from harness.catalog import scenarios as catalog

pytestmark = [pytest.mark.fleet, pytest.mark.extended, pytest.mark.broker, pytest.mark.spark]


@pytest.mark.parametrize("agent", ["reference", "lockstep_retry"])
def test_reconnect_storm_names_lockstep(agent: str, reports_root, backend_kind, scenario_record) -> None:
    out = catalog.run(
        "fleet-masterslave",
        catalog.topology_named("pair"),
        agent_cmd=None if agent == "reference" else defect_command(agent),
        reports=reports_root,
        backend=backend_kind,
        show_progress=False,
        fleet=20,
    )
    scenario_record(out.result)
    v = out.result.verdict
    assert v is not None, f"not judged; {out.result.run_dir}"
    storm = v.check("reconnect_storm")
    if agent == "reference":
        assert storm.status == "pass", v.message("reference fleet")
    else:
        assert "reconnect_storm" in v.broken, v.message("lock-step fleet")
        assert set(v.broken) <= {"reconnect_storm", "bounded_retry", "at_least_once"}, v.message("lockstep")
