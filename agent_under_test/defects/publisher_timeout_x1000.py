"""Defect 2 — publisher timeout multiplied by 1000 (the real PCA compares seconds with timeout*1000).

The default 900 s becomes ~10 days: the publisher never drops anything, and during an outage the
publications pile up and go out long after the moment they were meant for.

Caught by: every broker unreachable (link down on all links) for longer than mb.publisher.timeout,
then healed: the reference drops exactly the messages whose outage outlasted the timeout (at first
attempt + timeout); this agent drops none and sends messages later than first attempt + timeout.
"""

from __future__ import annotations

import sys

from agent_under_test.reference.agent import ReferenceAgent
from agent_under_test.reference.cli import main


class PublisherTimeoutX1000Agent(ReferenceAgent):
    variant = "publisher_timeout_x1000"

    def publish_timeout(self) -> float:
        return float(self.conf.publisher_timeout) * 1000.0


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.publisher_timeout_x1000", PublisherTimeoutX1000Agent))
