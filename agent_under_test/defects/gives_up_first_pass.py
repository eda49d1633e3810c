"""Defect 14 — the publisher gives up after its first failed pass over mb.urls (issue 35: a client
library that tries each URL once at start-up and never again).

Only a publisher that never connected gives up; once connected it fails over like the reference.

Caught by: a pause of the master at start-up (`scenarios/schedules/pause-master-at-start.json`):
the paused master answers no CONNECT and holds the store lock, so the slave cannot serve either;
the first pass fails, the publisher never tries again and drops every message while the thawed
master serves. Named for `connect_timeout` (a role that never connected while a member served),
not `non_vacuous`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from agent_under_test.reference.agent import ReferenceAgent
from agent_under_test.reference.cli import main
from agent_under_test.reference.transport import Link, LinkError


class GivesUpFirstPassAgent(ReferenceAgent):
    variant = "gives_up_first_pass"
    _publisher_gave_up = False
    _publisher_connected = False

    def connect_first_available(
        self, role: str, cid: str | None, durable: bool, on_message: Callable[..., Any] | None, reason: str
    ) -> tuple[Link | None, LinkError | None]:
        if role != "publisher":
            return super().connect_first_available(role, cid, durable, on_message, reason)
        if self._publisher_gave_up:
            return None, LinkError("gave_up", "no retry after the first pass over mb.urls")
        link, err = super().connect_first_available(role, cid, durable, on_message, reason)
        self._publisher_connected |= link is not None
        self._publisher_gave_up = not self._publisher_connected
        return link, err


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.gives_up_first_pass", GivesUpFirstPassAgent))
