"""Defect 7 — resends messages that were already acknowledged (duplicates).

The publisher keeps its last acknowledged messages in its outbox and, on every reconnect, sends
them again along with the unacknowledged ones (a common "replay the outbox" bug).

Caught by: kill -9 of the master while publishing: deliveries show duplicates of messages whose
`sent` record precedes the disconnect, and the agent's own log has a `send_attempt` after a `sent`
for the same msg_id — which the reference never writes.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from dataclasses import replace

from agent_under_test.reference.agent import OutMsg, Publisher, ReferenceAgent
from agent_under_test.reference.cli import main
from agent_under_test.reference.transport import Link

REPLAY = 20


class ResendAckedPublisher(Publisher):
    def __init__(self, agent: ReferenceAgent) -> None:
        super().__init__(agent)
        self._replay: deque[OutMsg] = deque(maxlen=REPLAY)
        self._links = 0

    def on_acked(self, msg: OutMsg) -> None:
        self._replay.append(msg)

    def on_new_link(self, link: Link) -> None:
        self._links += 1
        if self._links > 1:
            now = time.monotonic()
            for msg in reversed(self._replay):
                self.pending.appendleft(replace(msg, first_attempt=now, deadline=self.deadline_for(now)))
            self._replay.clear()


class ResendAckedAgent(ReferenceAgent):
    variant = "resend_acked"

    def make_publisher(self) -> Publisher:
        return ResendAckedPublisher(self)


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.resend_acked", ResendAckedAgent))
