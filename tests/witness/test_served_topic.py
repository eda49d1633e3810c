"""The topic a broker consumer serves (harness.witness.events.served_topic): an MQTT connector
with the virtual-topic subscription strategy puts a durable subscription on a queue of its own and
any other one on a `VirtualTopic.` topic; the checkers ask about the MQTT topic either way."""

from __future__ import annotations

import pytest

from harness.witness.events import served_topic, topic_destination


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
