"""Defect 10 — liveness driven by a slow heartbeat (a 10 s keepalive checked every 5 s).

A closed connection is still noticed at once, but a broker that goes silent (paused, black-holed)
is only given up after the keepalive window of 15 s, checked on a 5 s heartbeat: 15-20 s instead
of the reference's ≤ 4 s.

Caught by: the liveness checker when the master is paused or its links are black-holed
(scenarios pause-master, blackhole-master).
"""

from __future__ import annotations

import sys
import time

from agent_under_test.reference.agent import ReferenceAgent
from agent_under_test.reference.cli import main
from agent_under_test.reference.transport import Link

HEARTBEAT_S = 5.0
KEEPALIVE_S = 10


class HeartbeatLivenessAgent(ReferenceAgent):
    variant = "heartbeat_liveness"

    def keepalive(self) -> int:
        return KEEPALIVE_S

    def liveness_timeout(self) -> float:
        return 1.5 * KEEPALIVE_S

    def serve(self, link: Link) -> str:
        beat = time.monotonic() + HEARTBEAT_S
        while not self.stop.is_set():
            link.pump(0.25)
            if link.closed_reason is not None:
                return link.closed_reason
            if time.monotonic() >= beat:
                beat = time.monotonic() + HEARTBEAT_S
                why = self.link_dead(link)
                if why is not None:
                    return why
        return "shutdown"


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.heartbeat_liveness", HeartbeatLivenessAgent))
