"""Defect 1 — QoS 0 and clean sessions (the real Stratos PCA: plain `mqtt.Client()`, QoS 0).

Subscriptions use QoS 0 and clean_session=True (nothing durable), publications QoS 0 (ActiveMQ
makes them non-persistent, and `sent` only means "written to the socket"). Messages published while
a subscriber is switching brokers, and QoS 0 messages held by a dying master, are gone.

Like the PCA's publisher, which opens a fresh one-shot connection for every message, its publisher
retries every 0.05-0.1 s, so after a switch it is back before the subscriptions, which then miss
what it publishes (the backlog of the outage first of all).

Caught by: kill -9 of the master while publishing (scenarios: master kill / failover under load):
the subscriptions re-subscribe after the publisher has flushed its backlog to the new master, so
reconciliation reports lost > 0, where the reference agent loses none.
"""

from __future__ import annotations

import sys

from agent_under_test.config import Publication, Subscription
from agent_under_test.reference.agent import Backoff, ReferenceAgent
from agent_under_test.reference.cli import main


class Qos0CleanSessionAgent(ReferenceAgent):
    variant = "qos0_clean_session"

    def subscription_mode(self, sub: Subscription) -> tuple[int, bool]:
        return 0, False

    def publication_qos(self, pub: Publication) -> int:
        return 0

    def publisher_backoff(self) -> Backoff:
        return Backoff(0.1, 0.1, self.rng)


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.qos0_clean_session", Qos0CleanSessionAgent))
