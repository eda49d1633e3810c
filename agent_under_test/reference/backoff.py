"""The reference agent's retry pacing."""

from __future__ import annotations

import random


class Backoff:
    """Capped exponential backoff with jitter: delays in [d/2, d], d = initial * 2^n <= cap."""

    def __init__(self, initial: float, cap: float, rng: random.Random) -> None:
        self.initial = min(initial, cap)
        self.cap = cap
        self.rng = rng
        self._d = self.initial

    def next(self) -> float:
        d = self._d
        self._d = min(self.cap, self._d * 2)
        return self.rng.uniform(d / 2, d)

    def reset(self) -> None:
        self._d = self.initial
