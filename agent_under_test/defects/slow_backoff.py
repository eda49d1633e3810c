"""Not a defect — a seeded regression: the reference agent backing off 3x slower.

Every pause of both connectors (after a lost connection, or a pass over mb.urls that found no
broker) is drawn from the reference's capped, jittered backoff with its initial delay and its cap
both multiplied by `FACTOR`: 0.3 s doubling to a 3 s cap, each pause in [d/2, d], instead of 0.1 s
doubling to 1 s. It is meant to keep every promise (recovery within 30 s, no loss, no drop at the
masterslave entry's timeout; not yet run on brokers, issue 43) while being slower back after a
takeover: about 1 s more than the reference after a 3 s takeover (the estimate behind it: the
reference's pauses are at its 1 s cap by then, slow_backoff's at 1.2-2.4 s).

Caught by: `bfh compare` of its rounds against the reference's (issue 43 item 4): `worse` on
recovery in masterslave (scenarios/test_seeded_regressions.py, docs/compare.md).
"""

from __future__ import annotations

import random
import sys

from agent_under_test.reference.agent import Backoff, ReferenceAgent
from agent_under_test.reference.cli import main

FACTOR = 3.0  # every pause 3x the reference's


def backoff(initial: float, cap: float, rng: random.Random) -> Backoff:
    """The reference's backoff with initial delay and cap scaled by FACTOR."""
    return Backoff(initial * FACTOR, cap * FACTOR, rng)


class SlowBackoffAgent(ReferenceAgent):
    variant = "slow_backoff"

    def new_backoff(self) -> Backoff:
        return backoff(self.conf.backoff_initial, self.conf.backoff_cap, self.rng)


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.slow_backoff", SlowBackoffAgent))
