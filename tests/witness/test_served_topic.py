"""The topic a broker consumer serves (harness.witness.events.served_topic): an MQTT connector
with the virtual-topic subscription strategy puts a durable subscription on a queue of its own and
any other one on a `VirtualTopic.` topic; the checkers ask about the MQTT topic either way."""

from __future__ import annotations

import pytest

from harness.verdict.witness import BrokerView
from harness.witness.events import has_consumer, served_topic, topic_destination


@pytest.mark.parametrize(
    ("destination", "topic"),
    [
        ("queue://Consumer.fleet-pair-001-s0:AT_LEAST_ONCE.VirtualTopic.topology.pair.>", "topology.pair.>"),
        ("queue://Consumer.ctl:EXACTLY_ONCE.VirtualTopic.instance.status.*.x", "instance.status.*.x"),
        ("VirtualTopic.topology.pair.>", "topology.pair.>"),
        ("topology.pair.>", "topology.pair.>"),
        ("queue://orders", "queue://orders"),  # an ordinary queue serves no topic
        ("queue://Consumer.a.b.VirtualTopic.x", "queue://Consumer.a.b.VirtualTopic.x"),  # not one element
        (None, "None"),
    ],
)
def test_served_topic(destination: str | None, topic: str) -> None:
    assert served_topic(destination) == topic


def test_a_durable_filter_and_its_queue_meet() -> None:
    assert served_topic(
        "queue://Consumer.c:AT_LEAST_ONCE.VirtualTopic." + topic_destination("instance/status/+/#")
    ) == topic_destination("instance/status/+/#")


def test_a_topic_named_virtual_topic_meets_its_consumer_either_way() -> None:
    """Both sides are mapped: a subscription of `VirtualTopic/x` on a broker without the strategy
    (consumer on `VirtualTopic.x`) still finds its consumer."""
    rec = {"ts": 1.0, "event": "consumer_added", "broker": "b", "source": "advisory", "client_id": "c"}
    gap = {"broker": "b", "source": "advisory"}
    opened = [
        {**gap, "ts": 0.1, "event": "observer_gap_start"},
        {**gap, "ts": 0.5, "event": "observer_gap_end"},
    ]
    recs = [*opened, {**rec, "destination": "VirtualTopic.x", "consumer_id": "1"}]
    assert has_consumer(recs, "b", 2.0, "c", topic_destination("VirtualTopic/x")) is True
    assert BrokerView(recs, {}).has_consumer("b", 2.0, {"c"}, topic_destination("VirtualTopic/x")) is True
