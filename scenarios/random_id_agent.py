"""A client as most libraries make one: its own short random client id per role (stable for the
process, so durable sessions survive a reconnect), and `subscribed` logged as it sends SUBSCRIBE
(the `subscribed_on_send` defect). The subscribe-held entry must name it whatever the id's length
(scenarios/test_consumer_confirmed.py); no entry may be sized from the contract's client ids."""

from __future__ import annotations

import secrets
import sys
from pathlib import Path

from agent_under_test.defects.subscribed_on_send import SubscribedOnSendAgent
from agent_under_test.reference.cli import main


class RandomIdAgent(SubscribedOnSendAgent):
    variant = "random_id_on_send"

    def client_id(self, role: str) -> str:
        ids: dict[str, str] = self.__dict__.setdefault("_random_ids", {})
        return ids.setdefault(role, secrets.token_hex(4))


def command() -> str:
    """The agent command template (run as a file: the checkout's `scenarios` need not be importable
    from the agent's working directory)."""
    return f"{{python}} {Path(__file__).resolve()} --config {{config}} --workload {{workload}} --log {{log}}"


if __name__ == "__main__":
    sys.exit(main("random_id_agent", RandomIdAgent))
