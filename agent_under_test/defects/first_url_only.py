"""Defect 3 — no failover: only the first URL of mb.urls is used (the PCA before 4.1.5).

Caught by: kill -9 of the master (first URL) with the slave taking over: this agent never publishes
or receives again (lost and dropped messages, no `connected` to the slave); the reference is back
within about a second of the slave opening its ports.
"""

from __future__ import annotations

import sys

from agent_under_test.config import BrokerUrl
from agent_under_test.reference.agent import ReferenceAgent
from agent_under_test.reference.cli import main


class FirstUrlOnlyAgent(ReferenceAgent):
    variant = "first_url_only"

    def urls(self) -> list[BrokerUrl]:
        return list(self.conf.urls[:1])


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.first_url_only", FirstUrlOnlyAgent))
