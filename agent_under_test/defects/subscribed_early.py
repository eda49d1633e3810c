"""Defect 9 — `subscribed` before the broker confirmed (the real PCA sets its subscribed flag when
it sends SUBSCRIBE, even before CONNACK, and keeps it across reconnects).

Each subscription logs `subscribed` (naming the first URL of mb.urls) as it starts a connect pass,
before any broker answered, and never after the SUBACK.

Caught by: the subscription-confirmed checker on any scenario: a `subscribed` with no live
connection to the broker it names (harness.verdict.checks.subscription_confirmed).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from agent_under_test.reference.agent import ReferenceAgent, Subscriber
from agent_under_test.reference.cli import main
from agent_under_test.reference.transport import Link, LinkError


class SubscribedEarlyAgent(ReferenceAgent):
    variant = "subscribed_early"

    def log_subscribed(self, sub: Subscriber, broker: str) -> None:
        return  # already claimed when the pass started

    def connect_first_available(
        self, role: str, cid: str | None, durable: bool, on_message: Callable[..., Any] | None, reason: str
    ) -> tuple[Link | None, LinkError | None]:
        if role.startswith("subscriber:") and self.urls():
            topic = role.removeprefix("subscriber:")
            self.log.write("subscribed", topic=topic, broker=self.urls()[0].key, qos=1, durable=durable)
        return super().connect_first_available(role, cid, durable, on_message, reason)


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.subscribed_early", SubscribedEarlyAgent))
