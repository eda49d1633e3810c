"""Negative controls of the checkers: runs that must be judged broken, with the reference agent
(the fault is the topology's or the workload's, not the agent's)."""

from __future__ import annotations

import pytest

from agent_under_test.defects import command as defect_command
from harness.catalog import scenarios as catalog


def _run(entry, topology, reports_root, backend_kind, scenario_record, agent_cmd=None):
    out = catalog.run(
        entry, topology, agent_cmd=agent_cmd, reports=reports_root, backend=backend_kind, show_progress=False
    )
    scenario_record(out.result)
    assert out.result.verdict is not None
    return out.result


@pytest.mark.network
@pytest.mark.broker
@pytest.mark.spark
def test_seed002_static_list_breaks_bridge_health(reports_root, backend_kind, scenario_record):
    """Seed 002: `static:(master,slave)` bridges to a pair keep failing to connect to the slave under
    a kill of the remote master; the verdict names bridge health (the `masterslave:` form passes:
    the catalog's `network` entry)."""
    r = _run(
        catalog.SCENARIOS["network"],
        catalog.static_list_network(),
        reports_root,
        backend_kind,
        scenario_record,
    )
    assert "bridge_health" in r.verdict.broken, r.verdict.message("static:(master,slave) not flagged")


@pytest.mark.verdict_power
@pytest.mark.broker
@pytest.mark.spark
def test_qos0_workload_sees_missed_deliveries(reports_root, backend_kind, scenario_record):
    """The checker can see loss: the master kill with a QoS 0, clean-session workload (allowed by
    the workload, so no promise is broken) published the way the real Stratos agent does shows
    deliveries that never arrived."""
    entry = catalog.with_changes("masterslave", qos=0, durable=False)
    r = _run(
        entry,
        catalog.topology_named("pair"),
        reports_root,
        backend_kind,
        scenario_record,
        defect_command("qos0_clean_session"),
    )
    d = r.summary["deliveries"]
    assert d.get("lost", 0) + d.get("missed", 0) > 0, r.verdict.message(
        "QoS 0 across a master kill lost nothing"
    )
    assert "no_downgrade" not in r.verdict.broken, r.verdict.message("QoS 0 was asked for")


@pytest.mark.security
@pytest.mark.broker
@pytest.mark.spark
def test_agent_refusing_ssl_urls_is_not_applicable(reports_root, backend_kind, scenario_record):
    """An agent that takes host:port only (as the Stratos agent's mb.urls does) and exits on the TLS
    topology's ssl:// URLs is `n/a` there, not a failure of other promises; its credential promises
    are judged on auth-pair (users, no TLS) instead."""
    refuses = "sh -c 'echo \"unsupported URL scheme in mb.urls: ssl://\" >&2; exit 2' {config}"
    r = _run(
        catalog.SCENARIOS["tls-credentials-kill"],
        catalog.topology_named("secure-pair"),
        reports_root,
        backend_kind,
        scenario_record,
        agent_cmd=refuses,
    )
    assert r.verdict.verdict == "n/a", r.verdict.message("an agent refusing ssl:// URLs")
    assert "ssl" in r.verdict.note and not r.verdict.broken
