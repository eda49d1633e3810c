"""Defect — a subscriber thread that dies silently: after its tenth message, the first
subscription's listener stops (an uncaught error in a callback thread), logging nothing. Its socket
stays open and unread; the broker expires the keepalive and removes the connection, and the agent
never notices, never reconnects, never says so.

Caught by: any scenario, `baseline` included: `at_least_once`, the lost deliveries blamed on the
agent from the broker's account (dispatched, never acked, the connection removed by the broker;
the agent logged no loss; never back for what the durable subscription kept).
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from pathlib import Path

from agent_under_test.config import AgentConf, BrokerUrl, Workload
from agent_under_test.reference.agent import OnMessage, ReferenceAgent
from agent_under_test.reference.cli import main
from agent_under_test.reference.transport import Link

AFTER = 10  # messages the first subscription receives before its listener dies
DIES = "sub-0"  # the first subscription's thread (Subscriber names its thread sub-<index>)


class SilentListenerDeathAgent(ReferenceAgent):
    variant = "silent_listener_death"

    def __init__(self, conf: AgentConf, workload: Workload, log_path: str | Path) -> None:
        super().__init__(conf, workload, log_path)
        self.seen: Counter[str] = Counter()

    def received_handler(self, subscription: str, url: BrokerUrl) -> OnMessage:
        logged = super().received_handler(subscription, url)

        def handler(topic: str, payload: bytes) -> None:
            self.seen[subscription] += 1
            logged(topic, payload)

        return handler

    def serve(self, link: Link) -> str:
        if threading.current_thread().name != DIES or not self.wl.subscriptions:
            return super().serve(link)
        first = self.wl.subscriptions[0].topic
        step = min(self.conf.liveness_interval, 0.25)
        while not self.stop.is_set() and self.seen[first] < AFTER:
            link.pump(step)
            if self.link_dead(link) is not None:
                return super().serve(link)  # a real loss before the defect: as the reference
        self.stop.wait()  # dead: nothing read, nothing sent, nothing logged
        return "shutdown"


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.silent_listener_death", SilentListenerDeathAgent))
