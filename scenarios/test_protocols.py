"""The masterslave core over both protocols: MQTT (QoS 1, durable sessions) and STOMP (persistent
sends with receipts, durable subscriptions, client-individual acks)."""

from __future__ import annotations

import pytest

from harness.schedule import Schedule, Step
from harness.topology import builtin_topology
from scenarios.support import assert_no_loss, explain, received_after

pytestmark = [pytest.mark.protocols, pytest.mark.broker, pytest.mark.spark]
PAIR = builtin_topology("pair")


@pytest.mark.parametrize(("protocol", "fault"), [("mqtt", "kill"), ("stomp", "kill"), ("stomp", "stop")])
def test_master_failover_over_protocol(run_scenario, protocol, fault):
    """Promise: over either protocol, a killed or stopped master loses no acknowledged message at a
    durable subscription and the agent receives again from the new master."""
    sched = Schedule(seed=2, steps=[Step(at=5, fault=fault, target="master:pair")], settle_s=8)
    r = run_scenario(PAIR, sched, f"{protocol}-{fault}", group="pair", protocol=protocol)
    assert_no_loss(r, f"{fault} of the master over {protocol}")
    assert received_after(r.run_dir, fault), explain(
        r.summary, r.run_dir, "nothing received after the takeover"
    )
