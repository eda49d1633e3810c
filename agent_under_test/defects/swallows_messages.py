"""Defect — a receive handler that silently throws some messages away (a swallowed parse error):
the client acks each message, the agent never logs `received` for one in eleven and never
processes it.

Caught by: any scenario, `baseline` included: `at_least_once`, the lost deliveries blamed on the
agent from the broker's account (dispatched to the agent's consumer and acked by its client; the
agent never logged it).
"""

from __future__ import annotations

import sys
import zlib

from agent_under_test.config import BrokerUrl
from agent_under_test.reference.agent import OnMessage, ReferenceAgent
from agent_under_test.reference.cli import main

EVERY = 11  # one message in this many (by a hash of its payload: the same ones every run)


class SwallowsMessagesAgent(ReferenceAgent):
    variant = "swallows_messages"

    def received_handler(self, subscription: str, url: BrokerUrl) -> OnMessage:
        logged = super().received_handler(subscription, url)

        def handler(topic: str, payload: bytes) -> None:
            if zlib.crc32(payload) % EVERY == 0:
                return  # "except ValueError: pass" in a parser: acked, never processed
            logged(topic, payload)

        return handler


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.swallows_messages", SwallowsMessagesAgent))
