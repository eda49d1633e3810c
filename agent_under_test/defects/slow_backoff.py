"""Not a defect — a seeded regression: the reference agent backing off 3x slower.

Every pause of both connectors (after a lost connection, or a pass over mb.urls that found no
broker) is drawn from the reference's capped, jittered backoff with its initial delay and its cap
both multiplied by `FACTOR`: 0.3 s doubling to a 3 s cap, each pause in [d/2, d], instead of 0.1 s
doubling to 1 s. It keeps every promise (5 masterslave rounds on brokers, seeds 1-5, 2026-11-27)
while being slower back after a takeover: its 4th pause (1.2-2.4 s) comes before a 2.5-3.5 s
takeover ends, where the reference's pauses stay under its 1 s cap. Measured: each role's longest
pause while away 1.28-2.60 s (the reference's 0.60-1.00 s); recovery from the kill +0.78 s, too
little beside the takeover's own spread to flag in 5 rounds.

Caught by: `bfh compare` of its rounds against the reference's (issue 43 item 4): `worse` on
recovery's `retry_pause_max_s` in masterslave (scenarios/test_seeded_regressions.py,
docs/compare.md).
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
