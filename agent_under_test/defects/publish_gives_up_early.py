"""Defect 4 — gives up on a publish after the first broker fails (drops too early).

A message that finds no connection on its first attempt, or whose connection dies before the
broker acknowledged it, is dropped at once (reason `publisher_timeout`) instead of being retried
until mb.publisher.timeout has passed since its first attempt.

Caught by: kill -9 of the master with mb.publisher.timeout (900 s) far longer than the takeover:
the reference drops nothing; this agent drops the messages published during the switch, long
before their timeout (drop time - first attempt << timeout).
"""

from __future__ import annotations

import sys

from agent_under_test.reference.agent import OutMsg, Publisher, ReferenceAgent
from agent_under_test.reference.cli import main


class GivesUpEarlyPublisher(Publisher):
    def should_drop(self, msg: OutMsg, now: float) -> bool:
        return msg.deadline <= now or (self.link is None and msg.attempts >= 1)


class PublishGivesUpEarlyAgent(ReferenceAgent):
    variant = "publish_gives_up_early"

    def make_publisher(self) -> Publisher:
        return GivesUpEarlyPublisher(self)


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.publish_gives_up_early", PublishGivesUpEarlyAgent))
