"""Defect 13 — never resubscribes: once a subscription's first connection is lost, it stays away
(the publisher still fails over).

Caught by: any fault that costs the subscribers their connection (`pause-master`, `masterslave`):
`recovery`, and the lost deliveries blamed on the agent (harness.verdict.blame): no consumer on the
serving master because the agent never came back.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from agent_under_test.reference.agent import ReferenceAgent
from agent_under_test.reference.cli import main
from agent_under_test.reference.transport import Link, LinkError


class NeverResubscribesAgent(ReferenceAgent):
    variant = "never_resubscribes"

    def connect_first_available(
        self, role: str, cid: str | None, durable: bool, on_message: Callable[..., Any] | None, reason: str
    ) -> tuple[Link | None, LinkError | None]:
        if role.startswith("subscriber:") and reason != "initial":
            return None, None  # gone for good
        return super().connect_first_available(role, cid, durable, on_message, reason)


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.never_resubscribes", NeverResubscribesAgent))
