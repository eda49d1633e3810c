"""Generated fault schedules on a pair (Hypothesis), with shrinking to a replayable schedule file.

By default a few examples run (derandomized, so CI is reproducible); `-m soak` with
BFH_CHAOS_EXAMPLES / BFH_CHAOS_BUDGET_S runs many, for as long as asked.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings

from harness.agents import agent_factory
from harness.runner import execute
from harness.topology import builtin_topology
from scenarios.chaos import Budget, save_schedule, schedules
from scenarios.support import agent_records, explain, fault_records

PAIR = builtin_topology("pair")
TIMEOUT_S = 6  # publisher timeout: long outages must produce explained drops


def check_property(schedule, reports_root, backend, agent_cmd) -> None:
    path = save_schedule(schedule, reports_root / "schedules")
    replay = f"replay: bfh run --topology pair --schedule {path} --publisher-timeout {TIMEOUT_S} --count 160"
    r = execute(
        PAIR,
        agent_factory(group="pair", count=160, timeout_s=TIMEOUT_S, command=agent_cmd),
        schedule,
        label="chaos",
        reports=reports_root,
        backend=backend,
        show_progress=False,
    )
    s = r.summary
    assert s is not None
    d = s["deliveries"]
    assert d["lost"] == 0, explain(s, r.run_dir, f"generated chaos lost messages; {replay}")
    assert s["unexpected"] == 0, explain(s, r.run_dir, f"unexpected messages; {replay}")
    assert d.get("ghost", 0) == 0, explain(s, r.run_dir, f"ghost deliveries; {replay}")
    # Every drop is explained: the message was first tried at least TIMEOUT_S before the drop.
    firsts: dict[str, float] = {}
    for a in agent_records(r.run_dir, "send_attempt"):
        firsts[a["msg_id"]] = min(firsts.get(a["msg_id"], a["ts"]), a["ts"])
    early = [
        x["msg_id"]
        for x in agent_records(r.run_dir, "dropped")
        if x["ts"] - firsts[x["msg_id"]] < TIMEOUT_S - 0.5
    ]
    assert not early, explain(s, r.run_dir, f"drops before the publisher timeout: {early[:5]}; {replay}")
    # Recovery: after the last fault that began while messages were still being sent, the agent
    # must receive again (a heal that comes after the traffic has nothing left to show).
    last_sent = max((x["ts"] for x in agent_records(r.run_dir, "sent")), default=0.0)
    starts = [
        f["ts"] for f in fault_records(r.run_dir) if f["event"] == "fault_start" and f["ts"] < last_sent
    ]
    if starts:
        after = [x for x in agent_records(r.run_dir, "received") if x["ts"] > max(starts)]
        assert after, explain(s, r.run_dir, f"the agent did not recover after the last fault; {replay}")
    assert not r.stalled, explain(s, r.run_dir, f"the agent stalled; {replay}")


EXAMPLES = int(os.environ.get("BFH_CHAOS_EXAMPLES", "2"))
BUDGET_S = float(os.environ.get("BFH_CHAOS_BUDGET_S", "240"))


@pytest.mark.masterslave
@pytest.mark.broker
@pytest.mark.spark
@pytest.mark.slow
def test_generated_chaos_pair(reports_root, backend_kind, agent_cmd):
    """Promise: under generated schedules of kills, stops, pauses, restarts and link faults on a pair,
    no at-least-once message is lost, nothing unexpected arrives, every drop is explained by an
    outage longer than the publisher timeout, and the agent recovers after the heal."""
    budget = Budget(BUDGET_S)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(schedules())
    def prop(schedule):
        if budget.spent():  # a passing example: shrinking stops at the smallest failure found so far
            return
        check_property(schedule, reports_root, backend_kind, agent_cmd)

    prop()


@pytest.mark.soak
def test_generated_chaos_soak(reports_root, backend_kind, agent_cmd):
    """Soak: as many generated schedules as BFH_CHAOS_EXAMPLES allows within BFH_CHAOS_BUDGET_S."""
    budget = Budget(BUDGET_S)

    @settings(
        max_examples=max(EXAMPLES, 20), deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(schedules(budget_s=30.0, max_steps=5))
    def prop(schedule):
        if budget.spent():
            return
        check_property(schedule, reports_root, backend_kind, agent_cmd)

    prop()
