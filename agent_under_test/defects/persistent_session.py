"""Not a defect — a control: a subscriber that relies on the broker's persistent session.

Each subscription subscribes once, at its first connection, and logs `subscribed` once. After a
reconnect it sends no SUBSCRIBE and logs no `subscribed`: with MQTT `clean_session=0` and its
stable client id, ActiveMQ restores the durable subscription itself (as a client library with its
own persistent session does, issue 41). docs/agent-contract.md C-11: it counts as subscribed
again when the broker witness sees its consumer on the new master, so it must pass every
promise, fleet ones included, when every message arrives. Its opposite, `never_resubscribes`
(which never reconnects its subscriptions), must still fail.

Durable MQTT subscriptions only: a `durable: false` or `qos: 0` subscription (a clean session)
subscribes on every connection as the reference does, since the broker keeps nothing for it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from agent_under_test.reference.agent import ReferenceAgent, Subscriber
from agent_under_test.reference.cli import main
from agent_under_test.reference.transport import Link, LinkError


class PersistentSessionAgent(ReferenceAgent):
    variant = "persistent_session"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._subscribed: set[str] = set()  # roles the broker holds a persistent session for

    def connect_first_available(
        self, role: str, cid: str | None, durable: bool, on_message: Callable[..., Any] | None, reason: str
    ) -> tuple[Link | None, LinkError | None]:
        link, err = super().connect_first_available(role, cid, durable, on_message, reason)
        if link is not None and durable and self.wl.protocol == "mqtt" and role in self._subscribed:
            link.subscribe = _restored  # type: ignore[method-assign]
        return link, err

    def log_subscribed(self, sub: Subscriber, broker: str) -> None:
        if sub.role in self._subscribed:
            return  # restored by the broker: nothing sent, nothing to log
        if sub.durable and self.wl.protocol == "mqtt":
            self._subscribed.add(sub.role)
        super().log_subscribed(sub, broker)


def _restored(topic_filter: str, qos: int, durable: bool, name: str, timeout: float | None) -> None:
    """No SUBSCRIBE: the broker's persistent session brings the subscription back."""


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.persistent_session", PersistentSessionAgent))
