"""Generated fault schedules on a pair (Hypothesis), with shrinking to a replayable schedule file.

By default a few examples run (derandomized, so CI is reproducible); `-m soak` with
BFH_CHAOS_EXAMPLES / BFH_CHAOS_BUDGET_S runs many, for as long as asked.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, seed, settings

from harness.agents.launch import agent_factory
from harness.catalog.scenarios import POLICY
from harness.run import rounds
from harness.run.runner import execute
from harness.topology import builtin_topology
from harness.verdict import DEFAULT_GATES
from scenarios.chaos import Budget, save_schedule, schedules

PAIR = builtin_topology("pair")
TIMEOUT_S = 6  # publisher timeout: long outages must produce explained drops


def check_property(
    schedule, reports_root, backend, agent_cmd, seen: list | None = None, agent_protocol: str | None = None
) -> None:
    """The verdict of every promise (harness.verdict), as for a catalog entry."""
    path = save_schedule(schedule, reports_root / "schedules")
    replay = f"replay: bfh run --topology pair --schedule {path} --publisher-timeout {TIMEOUT_S} --count 160"
    r = execute(
        PAIR,
        agent_factory(
            group="pair", count=160, timeout_s=TIMEOUT_S, command=agent_cmd, command_protocol=agent_protocol
        ),
        schedule,
        label="chaos",
        reports=reports_root,
        backend=backend,
        show_progress=False,
        policy=POLICY,
        scenario={"name": "generated-chaos", "gates": list(DEFAULT_GATES), "params": {}},
    )
    if seen is not None:  # --bfh-rounds: the failing example's run folder and replay command
        seen.append((r.run_dir, replay.removeprefix("replay: ")))
    assert r.verdict is not None, f"not judged; {replay}"
    assert r.verdict.verdict != "fail", r.verdict.message(f"generated chaos; {replay}")


EXAMPLES = int(os.environ.get("BFH_CHAOS_EXAMPLES", "2"))
BUDGET_S = float(os.environ.get("BFH_CHAOS_BUDGET_S", "240"))


@pytest.mark.masterslave
@pytest.mark.broker
@pytest.mark.spark
@pytest.mark.slow
def test_generated_chaos_pair(
    reports_root, backend_kind, agent_cmd, bfh_agent_protocol, bfh_rounds, record_property
):
    """Promise: under generated schedules of kills, stops, pauses, restarts and link faults on a pair,
    every promise holds (the same checkers as the catalog). --bfh-rounds N: N rounds, the first
    derandomized, the others with Hypothesis seeds 1..N-1 (other schedules)."""
    budget = Budget(BUDGET_S * bfh_rounds)

    def one(i: int) -> rounds.Round:
        seen: list = []

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=i == 0,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(schedules())
        @seed(i)
        def prop(schedule):
            if budget.spent():  # a passing example: shrinking stops at the smallest failure found so far
                return
            kept = seen if bfh_rounds > 1 else None
            check_property(schedule, reports_root, backend_kind, agent_cmd, kept, bfh_agent_protocol)

        if bfh_rounds == 1:
            prop()
            return rounds.Round(i, "pass", None)
        try:
            prop()
        except AssertionError as e:
            run_dir, replay = seen[-1] if seen else (None, "")
            return rounds.Round(i, "fail", run_dir, replay, str(e))
        return rounds.Round(i, "pass", seen[-1][0] if seen else None)

    tally = rounds.repeat("generated-chaos", bfh_rounds, one)
    for k, v in tally.properties():
        record_property(k, v)
    assert not tally.failures, tally.message()


@pytest.mark.soak
def test_generated_chaos_soak(reports_root, backend_kind, agent_cmd, bfh_agent_protocol):
    """Soak: as many generated schedules as BFH_CHAOS_EXAMPLES allows within BFH_CHAOS_BUDGET_S."""
    budget = Budget(BUDGET_S)

    @settings(
        max_examples=max(EXAMPLES, 20), deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(schedules(budget_s=30.0, max_steps=5))
    def prop(schedule):
        if budget.spent():
            return
        check_property(schedule, reports_root, backend_kind, agent_cmd, agent_protocol=bfh_agent_protocol)

    prop()
