"""Defect — retries with no backoff and no jitter, in lock-step with its peers.

Every reconnect (after a lost connection or a pass over mb.urls that found no broker) waits only
for the next 0.1 s tick of the wall clock: a fleet of these agents, sharing one clock, hits the
brokers together, ten passes a second each, for as long as the outage lasts. One such agent is a
small nuisance; a thousand of them are the thundering herd that keeps a slave from coming up.

Caught by: a fleet entry (`bfh run fleet-masterslave --fleet 20`): the fleet's connection
attempts at the brokers' side exceed the storm bound (`reconnect_storm`); one agent alone also
exceeds its own retry bound (`bounded_retry`).
"""

from __future__ import annotations

import sys
import time

from agent_under_test.reference.agent import Backoff, ReferenceAgent
from agent_under_test.reference.cli import main

TICK_S = 0.1


class LockstepBackoff(Backoff):
    def next(self) -> float:
        return TICK_S - (time.time() % TICK_S)  # the next tick every peer waits for too


class LockstepRetryAgent(ReferenceAgent):
    variant = "lockstep_retry"

    def new_backoff(self) -> Backoff:
        return LockstepBackoff(self.conf.backoff_initial, self.conf.backoff_cap, self.rng)


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.lockstep_retry", LockstepRetryAgent))
