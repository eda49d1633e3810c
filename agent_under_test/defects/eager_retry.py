"""Not a defect — a seeded regression: the reference agent retrying twice as often.

Every pause of both connectors is drawn from the reference's capped, jittered backoff with its
initial delay and its cap both divided by `FACTOR`: 0.05 s doubling to a 0.5 s cap, each pause in
[d/2, d], instead of 0.1 s doubling to 1 s. That is about twice the failed attempts per second
while no broker accepts, still inside `bounded_retry` (4 per URL per second over any 5 s): this
pacing makes 3.3 passes per second on average over its first 5 s (the reference 1.9), 2.7 at
the cap, and at most 3.8 in 20,000 simulated first 5 s (tests/agent/test_seeded_regressions.py
simulates it; not yet run on brokers, issue 43).

Caught by: `bfh compare` of its rounds against the reference's (issue 43 item 4): `worse` on
failed attempts per second in masterslave (scenarios/test_seeded_regressions.py, docs/compare.md).
"""

from __future__ import annotations

import random
import sys

from agent_under_test.reference.agent import Backoff, ReferenceAgent
from agent_under_test.reference.cli import main

FACTOR = 2.0  # every pause half the reference's


def backoff(initial: float, cap: float, rng: random.Random) -> Backoff:
    """The reference's backoff with initial delay and cap divided by FACTOR."""
    return Backoff(initial / FACTOR, cap / FACTOR, rng)


class EagerRetryAgent(ReferenceAgent):
    variant = "eager_retry"

    def new_backoff(self) -> Backoff:
        return backoff(self.conf.backoff_initial, self.conf.backoff_cap, self.rng)


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.eager_retry", EagerRetryAgent))
