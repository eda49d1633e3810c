"""Defect 15 — `subscribed` when it sends SUBSCRIBE, without waiting for the broker (the real
Stratos agent, issue 35): each subscription pipelines CONNECT and SUBSCRIBE and logs `connected`
and `subscribed` as it sends them, before any CONNACK or SUBACK; an attempt the broker never
answers ends as a lost connection (`subscribe_failed`), not a failed attempt.

Its own log is consistent (a `subscribed` on a `connected` connection), so
`subscription_confirmed` passes.

Caught by: `consumer_confirmed` (the broker's view): the member a `subscribed` names had no
consumer of it, a killed master (masterslave), a paused one (pause-master), both in generated
chaos (scenarios/test_consumer_confirmed.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from agent_under_test.reference.agent import ReferenceAgent, Subscriber
from agent_under_test.reference.cli import main
from agent_under_test.reference.transport import Link, LinkError


class SubscribedOnSendAgent(ReferenceAgent):
    variant = "subscribed_on_send"

    def log_subscribed(self, sub: Subscriber, broker: str) -> None:
        return  # already claimed when SUBSCRIBE went out

    def connect_first_available(
        self, role: str, cid: str | None, durable: bool, on_message: Callable[..., Any] | None, reason: str
    ) -> tuple[Link | None, LinkError | None]:
        if not role.startswith("subscriber:"):
            return super().connect_first_available(role, cid, durable, on_message, reason)
        topic, last = role.removeprefix("subscriber:"), None
        for url in self.urls():
            if self.stop.is_set():
                break
            self.log.write("connected", broker=url.key, role=role, reason=reason)
            self.log.write("subscribed", topic=topic, broker=url.key, qos=1, durable=durable)
            handler = on_message(url) if on_message is not None else None
            try:
                return self.transport.connect(url, cid, durable, handler, self.connect_timeout()), None
            except LinkError as e:
                self.log.write("disconnected", broker=url.key, role=role, reason=f"subscribe_failed: {e}")
                last = e
        return None, last


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.subscribed_on_send", SubscribedOnSendAgent))
