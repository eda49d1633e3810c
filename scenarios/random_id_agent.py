"""A client as most libraries make one: its own short random client id per role (stable for the
process, so durable sessions survive a reconnect), connected as the reference is (it waits for
the CONNACK), but `subscribed` logged as it sends SUBSCRIBE, before the SUBACK. Only a SUBSCRIBE
that waits names it: the subscribe-held entry must hold it whatever the id's length
(scenarios/test_consumer_confirmed.py); no entry may be sized from the contract's client ids."""

from __future__ import annotations

import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_under_test.reference.agent import ReferenceAgent, Subscriber
from agent_under_test.reference.cli import main
from agent_under_test.reference.link import Link
from agent_under_test.reference.transport import LinkError


class RandomIdAgent(ReferenceAgent):
    variant = "random_id_subscribed_at_subscribe"

    def client_id(self, role: str) -> str:
        ids: dict[str, str] = self.__dict__.setdefault("_random_ids", {})
        return ids.setdefault(role, secrets.token_hex(4))

    def log_subscribed(self, sub: Subscriber, broker: str) -> None:
        return  # already claimed when SUBSCRIBE went out

    def connect_first_available(
        self, role: str, cid: str | None, durable: bool, on_message: Callable[..., Any] | None, reason: str
    ) -> tuple[Link | None, LinkError | None]:
        link, err = super().connect_first_available(role, cid, durable, on_message, reason)
        if link is not None and role.startswith("subscriber:"):
            send = link.subscribe

            def subscribe(topic: str, qos: int, durable: bool, name: str, timeout: float | None) -> None:
                self.log.write("subscribed", topic=topic, broker=link.broker, qos=qos, durable=durable)
                send(topic, qos, durable, name, timeout)

            link.subscribe = subscribe  # type: ignore[method-assign]
        return link, err


def command() -> str:
    """The agent command template (run as a file: the checkout's `scenarios` need not be importable
    from the agent's working directory)."""
    return f"{{python}} {Path(__file__).resolve()} --config {{config}} --workload {{workload}} --log {{log}}"


if __name__ == "__main__":
    sys.exit(main("random_id_agent", RandomIdAgent))
