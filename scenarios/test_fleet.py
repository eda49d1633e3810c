"""Fleet verdict power (docs/fleet.md): the lock-step defect agent, 20 of them on one pair with the
master killed, is named for `reconnect_storm`; the reference fleet of the same size is not.
Extended tier (two fleet runs of ~2 min each on two cores)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_under_test.defects import command as defect_command
from harness.agents.packed import PACK_ENV
from harness.catalog import scenarios as catalog
from harness.contracts.msglog import iter_records

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


def _received_per_member(run_dir: Path) -> dict[str, int]:
    """Distinct messages each fleet member received (its log in agents/<member>/)."""
    out = {}
    for log in sorted((run_dir / "agents").glob("fleet-*/messages.jsonl")):
        ids = {r.get("msg_id") for r in iter_records(log) if r.get("event") == "received"}
        out[log.parent.name] = len(ids)
    return out


def test_packed_members_judged_as_processes(reports_root, backend_kind, scenario_record, monkeypatch) -> None:
    """20 reference members packed in processes of 10 (the default on two cores) and 20 member
    processes (BFH_FLEET_PACK=0): the same verdict, every member the same deliveries."""
    got = {}
    for label, pack in (("packed", "10"), ("processes", "0")):
        monkeypatch.setenv(PACK_ENV, pack)
        out = catalog.run(
            "fleet-masterslave",
            catalog.topology_named("pair"),
            reports=reports_root,
            backend=backend_kind,
            show_progress=False,
            fleet=20,
        )
        scenario_record(out.result)
        v = out.result.verdict
        assert v is not None, f"not judged; {out.result.run_dir}"
        packs = list((out.result.run_dir / "packs").glob("*/members.json"))
        assert len(packs) == (2 if label == "packed" else 0), packs
        for promise in ("fleet_recovery", "no_agent_left_behind", "reconnect_storm"):
            assert v.check(promise).status == "pass", v.message(f"{label} fleet")
        got[label] = (v.verdict, _received_per_member(out.result.run_dir), out.result.run_dir)
    (s1, per1, d1), (s2, per2, d2) = got["packed"], got["processes"]
    assert s1 == s2, f"packed {s1} ({d1}), processes {s2} ({d2})"
    assert per1.keys() == per2.keys() and len(per1) == 20
    assert set(per1.values()) == set(per2.values()) == {200}, (per1, per2)
