"""A real network partition of the master (docker network disconnect) under agent traffic."""

from __future__ import annotations

import json

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


def test_partitioned_master_fenced_agent_fails_over(run_scenario) -> None:
    """Promise: when the partitioned master is fenced (killed while still cut off, as an operator
    or a STONITH would), the slave takes the store lock and the agent fails over to it while the
    old master is still partitioned, with no acknowledged QoS 1 message lost.

    A partition alone cannot move the master here: the isolated broker keeps its lock on the
    shared volume (see test_isolate_master_agent_recovers_without_loss)."""
    sched = Schedule(
        seed=1,
        steps=[
            Step(at=4, fault="isolate", target="master:pair", duration=14),
            Step(at=8, fault="kill", target="master:pair"),  # the isolated member, still "master"
        ],
        settle_s=10,
    )
    r = run_scenario(builtin_topology("pair"), sched, "docker-isolate-fence", group="pair")
    faults = fault_records(r.run_dir)
    iso = next(f for f in faults if f["fault"] == "isolate" and f["event"] == "fault_start")
    kill = next(f for f in faults if f["fault"] == "kill" and f["event"] == "fault_start")
    iso_end = next(f["ts"] for f in faults if f["fault"] == "isolate" and f["event"] == "fault_end")
    assert kill["target"] == iso["target"], (iso, kill)
    run = json.loads((r.run_dir / "run.json").read_text())
    member_of = {lk["listen"]: lk["name"].rsplit("-", 1)[0] for lk in run["links"]}
    conns = [c for c in agent_records(r.run_dir, "connected") if c["broker"] in member_of]
    before = {member_of[c["broker"]] for c in conns if c["ts"] < iso["ts"]}
    failed_over = {member_of[c["broker"]] for c in conns if kill["ts"] < c["ts"] < iso_end}
    assert before == {iso["target"]}, f"before the partition: connected to {before}"
    assert failed_over and iso["target"] not in failed_over, (
        f"while {iso['target']} was partitioned and fenced the agent connected to {failed_over or 'nothing'}"
    )
    assert_no_loss(r, "a partitioned, fenced master")
    during = [x for x in received_after(r.run_dir, "kill") if x["ts"] < iso_end]
    assert during, explain(r.summary, r.run_dir, "nothing received from the new master during the partition")
