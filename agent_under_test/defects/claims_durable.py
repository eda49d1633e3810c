"""Defect — claims durable subscriptions and connects with clean sessions: its `subscribed`
records say `durable: true`, its CONNECTs ask for a clean session, so the broker keeps nothing for
it while it is away (a failover loses what was published meanwhile).

Caught by: any fault that costs the subscribers their connection (`masterslave`): `at_least_once`,
the lost deliveries blamed on the agent from the broker's account (the broker's subscription of
its client id was never durable, whatever the agent's log says).
"""

from __future__ import annotations

import sys

from agent_under_test.config import Subscription
from agent_under_test.reference.agent import ReferenceAgent, Subscriber
from agent_under_test.reference.cli import main


class ClaimsDurableAgent(ReferenceAgent):
    variant = "claims_durable"

    def subscription_mode(self, sub: Subscription) -> tuple[int, bool]:
        return sub.qos, False  # a clean session, whatever the workload asks

    def log_subscribed(self, sub: Subscriber, broker: str) -> None:
        durable = sub.sub.durable and sub.qos >= 1  # what it should have been, not what it was
        self.log.write("subscribed", topic=sub.sub.topic, broker=broker, qos=sub.qos, durable=durable)


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.claims_durable", ClaimsDurableAgent))
