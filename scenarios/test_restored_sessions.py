"""One rule for restored sessions (issue 41, docs/agent-contract.md C-11) on real fleets: a
subscription the broker restores after the failover counts as subscribed again once the broker
witness sees its consumer on the new master. The Java OpenWire agent (durable subscribers that
ActiveMQ's failover transport re-creates) and the MQTT `persistent_session` control (never
subscribes again) pass `fleet-masterslave` when every message arrives; `never_resubscribes`, whose
subscriptions never come back, still fails it. Extended tier (a fleet run each, ~1 min on two cores).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_under_test.defects import command as defect_command
from agent_under_test.defects import module_name
from harness.catalog import scenarios as catalog

pytestmark = [pytest.mark.fleet, pytest.mark.extended, pytest.mark.broker, pytest.mark.spark]

JAR = Path(__file__).resolve().parents[1] / "build" / "java" / "bfh-openwire-agent.jar"
AGENTS = {
    "java-openwire": (
        f"java -jar {JAR} --config {{config}} --workload {{workload}} --log {{log}}",
        "openwire",
    ),
    "persistent_session": (
        f"{{python}} -m {module_name('persistent_session')} --config {{config}} --workload {{workload}} "
        "--log {log}",
        None,
    ),
}
FLEET_PROMISES = {"fleet_recovery", "no_agent_left_behind", "reconnect_storm", "recovery"}


def _run(agent_cmd: str, protocol: str | None, reports_root, backend_kind, scenario_record, fleet: int):
    out = catalog.run(
        "fleet-masterslave",
        catalog.topology_named("pair"),
        agent_cmd=agent_cmd,
        agent_protocol=protocol,
        reports=reports_root,
        backend=backend_kind,
        show_progress=False,
        fleet=fleet,
    )
    scenario_record(out.result)
    assert out.result.verdict is not None, f"not judged; {out.result.run_dir}"
    return out.result


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_restored_subscriptions_count_in_the_fleet_promises(
    agent: str, reports_root, backend_kind, scenario_record
) -> None:
    cmd, protocol = AGENTS[agent]
    if protocol == "openwire" and not JAR.exists():
        pytest.skip(f"{JAR} not built (scripts/build_java_agent.sh)")
    res = _run(cmd, protocol, reports_root, backend_kind, scenario_record, 10)
    v = res.verdict
    d = (res.summary or {}).get("deliveries") or {}
    lost = sum(int(d.get(k) or 0) for k in ("lost", "missed"))
    if lost:
        pytest.skip(f"{lost} messages lost: the rule is judged on runs where every message arrived")
    assert not FLEET_PROMISES & set(v.broken), v.message(f"{agent} fleet")
    assert "restored by the broker" in v.check("consumer_confirmed").detail


def test_never_resubscribes_still_fails(reports_root, backend_kind, scenario_record) -> None:
    res = _run(defect_command("never_resubscribes"), None, reports_root, backend_kind, scenario_record, 5)
    broken = set(res.verdict.broken)
    assert {"no_agent_left_behind", "fleet_recovery"} <= broken, res.verdict.message("never_resubscribes")
