"""consumer_confirmed (the broker's view of `subscribed`) names an agent that claims a subscription
as it sends SUBSCRIBE (issue 35): `subscribed_on_send` on masterslave, pause-master, subscribe-held
(its SUBSCRIBE held seconds after its CONNECT, issue 41) and generated chaos (the first
derandomized draw of scenarios/chaos.py, a kill of the master, pinned as a replay file). Its own
log is consistent, so `subscription_confirmed` must not be what names it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_under_test.defects import command as defect_command
from harness.catalog import scenarios as catalog
from harness.faults.schedule import load_schedule
from scenarios.support import run_defect

CHAOS = Path(__file__).parent / "schedules" / "chaos-kill-master.json"


@pytest.mark.verdict_power
@pytest.mark.broker
@pytest.mark.spark
@pytest.mark.slow
# ids without "masterslave": a defect's self-test is no part of `pytest scenarios/ -k masterslave`
@pytest.mark.parametrize(
    "entry",
    [pytest.param("masterslave", id="kill-master"), "pause-master", "generated-chaos", "subscribe-held"],
)
def test_subscribed_on_send_named_by_the_broker_view(entry, reports_root, backend_kind, scenario_record):
    """Promise: a `subscribed` the broker never confirmed is named by consumer_confirmed."""
    if entry == "generated-chaos":
        out = catalog.run(
            catalog.with_changes("masterslave", timeout_s=6, count=160),
            catalog.topology_named("pair"),
            agent_cmd=defect_command("subscribed_on_send"),
            reports=reports_root,
            backend=backend_kind,
            show_progress=False,
            schedule=load_schedule(CHAOS),
            label="subscribed_on_send-chaos",
        )
        scenario_record(out.result)
        result = out.result
    else:
        sc = catalog.SCENARIOS[entry]
        result = run_defect(sc, "subscribed_on_send", reports_root, backend_kind, scenario_record, entry)
    v = result.verdict
    c = v.check("consumer_confirmed")
    assert c.status == "fail" and "consumer_confirmed" in v.broken, v.message(entry)  # gated by default
    assert any("had no consumer" in e["what"] or "was down" in e["what"] for e in c.evidence), c.evidence
    assert v.check("subscription_confirmed").status != "fail", v.message(entry)


@pytest.mark.verdict_power
@pytest.mark.broker
@pytest.mark.spark
@pytest.mark.slow
def test_a_random_client_id_is_held_like_the_contracts(reports_root, backend_kind, scenario_record):
    """Promise: subscribe-held holds every client's SUBSCRIBE, not only one whose client id has the
    contract's length: a short random id that logs `subscribed` at SUBSCRIBE is named."""
    from scenarios.random_id_agent import command

    sc = catalog.SCENARIOS["subscribe-held"]
    out = catalog.run(
        sc,
        catalog.topology_named(sc.topology),
        agent_cmd=command(),
        reports=reports_root,
        backend=backend_kind,
        show_progress=False,
        label="random-id-subscribe-held",
    )
    scenario_record(out.result)
    v = out.result.verdict
    assert v is not None, out.result.run_dir
    c = v.check("consumer_confirmed")
    assert c.status == "fail" and "consumer_confirmed" in v.broken, v.message("subscribe-held")
