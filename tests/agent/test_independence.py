"""Each subscription has its own connection and fails over on its own.

The subscriber connections are cut one at a time (Faults.sever, a fault window per cut). With the
reference agent each cut disturbs exactly one role. The shared-connection defect agent is run
through the same check as a control: there, one cut disconnects every subscription.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from harness.contracts.msglog import iter_records
from harness.run.env import Environment
from tests.agent.support import (
    REFERENCE,
    defect,
    events,
    lost_connections,
    start_agent,
    stop_ok,
    subscribed_all,
    unique,
    wait_or_fail,
)

pytestmark = [pytest.mark.broker, pytest.mark.masterslave, pytest.mark.timeout(180)]


def _cut_windows(env: Environment, since: float) -> list[tuple[float, float]]:
    recs = [
        r for r in iter_records(env.run_dir / "faults.jsonl") if r["fault"] == "sever" and r["ts"] >= since
    ]
    starts = {r["fault_id"]: r["ts"] for r in recs if r["event"] == "fault_start"}
    ends = {r["fault_id"]: r["ts"] for r in recs if r["event"] == "fault_end"}
    return [(starts[f], ends[f]) for f in sorted(starts) if f in ends]


def _disturbed_per_cut(env: Environment, command: str) -> tuple[list[set[str]], Any]:
    root = unique("ind")
    subs = [f"{root}/a/#", f"{root}/b/#", f"{root}/c/#"]
    ag = start_agent(env, subscriptions=subs, command=command)
    wait_or_fail(ag, subscribed_all, 20, "subscriptions confirmed")
    master = env.backend.master("pair")
    assert master is not None
    link = env.plan.client_link(master, "mqtt")
    t0 = time.time()
    cuts = env.faults.sever(link.name, gap_s=1.5)
    assert cuts >= 1
    wait_or_fail(ag, subscribed_all, 10, "still subscribed")
    time.sleep(1.0)
    stop_ok(ag)
    windows = _cut_windows(env, t0)
    assert len(windows) == cuts
    lost = lost_connections(ag)
    per_cut = [{r["role"] for r in lost if start - 0.05 <= r["ts"] <= end} for start, end in windows]
    return per_cut, ag


def test_one_cut_disturbs_exactly_one_subscription(healthy_pair: Environment) -> None:
    per_cut, ag = _disturbed_per_cut(healthy_pair, REFERENCE)
    assert len(per_cut) == 3, f"expected one connection per subscription, cut {len(per_cut)}"
    assert all(len(roles) == 1 for roles in per_cut), per_cut
    assert len(set().union(*per_cut)) == 3, "each subscription's own connection was cut once"
    for sub in ag.spec.workload["subscriptions"]:
        assert len(events(ag, "subscribed", topic=sub["topic"])) == 2  # initial + after its own cut


def test_control_shared_connection_defect_is_caught(healthy_pair: Environment) -> None:
    per_cut, _ag = _disturbed_per_cut(healthy_pair, defect("shared_connection"))
    # the check above fails for this agent: a single cut takes down all three subscriptions
    assert len(per_cut) == 1
    assert len(per_cut[0]) == 3
