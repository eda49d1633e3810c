"""A real network partition of the master (docker network disconnect) under agent traffic."""

from __future__ import annotations

import pytest

from harness.schedule import Schedule, Step
from harness.topology import builtin_topology
from scenarios.support import agent_records, assert_no_loss, explain, fault_records, received_after

pytestmark = [pytest.mark.docker, pytest.mark.broker, pytest.mark.spark, pytest.mark.partition]


def test_isolate_master_agent_recovers_without_loss(run_scenario) -> None:
    """Promise: disconnecting the master's container from its network for 8 s mid-traffic (clients
    and bridges cut, the store lock kept) loses no acknowledged QoS 1 message, and the agent
    receives again after the partition heals."""
    sched = Schedule(
        seed=1, steps=[Step(at=4, fault="isolate", target="master:pair", duration=8)], settle_s=10
    )
    r = run_scenario(builtin_topology("pair"), sched, "docker-isolate", group="pair")
    events = [f["event"] for f in fault_records(r.run_dir) if f["fault"] == "isolate"]
    assert events[:2] == ["fault_start", "fault_end"], events
    start = next(f["ts"] for f in fault_records(r.run_dir) if f["fault"] == "isolate")
    # the partition was real: the agent lost its connections while it lasted
    assert [d for d in agent_records(r.run_dir, "disconnected") if d["ts"] > start]
    assert_no_loss(r, "network isolation of the master")
    assert received_after(r.run_dir, "isolate"), explain(
        r.summary, r.run_dir, "nothing received after the heal"
    )
