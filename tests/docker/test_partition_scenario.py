"""A real network partition of the master (docker network disconnect) under agent traffic."""

from __future__ import annotations

import json

import pytest

from harness.faults.schedule import Schedule, Step
from harness.topology import builtin_topology
from scenarios.support import agent_records, assert_verdict, fault_windows, received_after

pytestmark = [
    pytest.mark.docker,
    pytest.mark.broker,
    pytest.mark.spark,
    pytest.mark.partition,
    pytest.mark.extended,
    pytest.mark.timeout(1800),
]


def test_isolate_master_agent_recovers_without_loss(run_scenario) -> None:
    """Promise: disconnecting the master's container from its network for 8 s mid-traffic (clients
    and bridges cut, the store lock kept) loses no acknowledged QoS 1 message, and the agent
    receives again after the partition heals."""
    sched = Schedule(
        seed=1, steps=[Step(at=4, fault="isolate", target="master:pair", duration=8)], settle_s=10
    )
    r = run_scenario(builtin_topology("pair"), sched, "docker-isolate", group="pair")
    iso = fault_windows(r.run_dir, "isolate")
    assert iso and iso[0].end is not None, iso
    # the partition was real: the agent lost its connections while it lasted
    assert [d for d in agent_records(r.run_dir, "disconnected") if d["ts"] > iso[0].start]
    assert_verdict(r, "network isolation of the master")
    assert received_after(r.run_dir, "isolate"), f"nothing received after the heal; {r.run_dir}"


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
    iso = fault_windows(r.run_dir, "isolate")[0]
    kill = fault_windows(r.run_dir, "kill")[0]
    assert iso.end is not None, iso
    iso_end = iso.end
    assert kill.target == iso.target, (iso, kill)
    run = json.loads((r.run_dir / "run.json").read_text())
    member_of = {lk["listen"]: lk["name"].rsplit("-", 1)[0] for lk in run["links"]}
    conns = [c for c in agent_records(r.run_dir, "connected") if c["broker"] in member_of]
    before = {member_of[c["broker"]] for c in conns if c["ts"] < iso.start}
    failed_over = {member_of[c["broker"]] for c in conns if kill.start < c["ts"] < iso_end}
    assert before == {iso.target}, f"before the partition: connected to {before}"
    assert failed_over and iso.target not in failed_over, (
        f"while {iso.target} was partitioned and fenced the agent connected to {failed_over or 'nothing'}"
    )
    assert_verdict(r, "a partitioned, fenced master")
    during = [x for x in received_after(r.run_dir, "kill") if x["ts"] < iso_end]
    assert during, f"nothing received from the new master during the partition; {r.run_dir}"
