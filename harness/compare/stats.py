"""The statistics of `bfh compare` (docs/compare.md): scipy's tests, none written here.

- A measure: one value per round (the median of the round's samples), old against new by the
  one-sided Mann-Whitney U test of NEW shifted by the tolerance (exact, or by permutation when
  values tie), and the Hodges-Lehmann shift with the confidence interval that inverts that test.
- A promise: rounds broken against rounds judged, Boschloo's exact test (uniformly more powerful
  than Fisher's), one-sided.
- Many at once: Bonferroni over the measures and promises that can reach the level at all
  (Tarone's refinement for discrete tests), so an interval above the tolerance is a regression.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

ALPHA = 0.05  # a regression: worse by more than the tolerance with 95 % confidence
PERMUTATIONS = 9999  # tied values: exact over at most this many arrangements, else the normal approximation
MAX_ROUNDS = 200  # `rounds_needed` looks no further


def median(xs: Sequence[float]) -> float:
    return float(np.median(np.asarray(xs, dtype=float)))


def p95(xs: Sequence[float]) -> float:
    """Interpolated; with an infinite value (never reached), the sample at or above it."""
    a = np.asarray(xs, dtype=float)
    return float(np.percentile(a, 95, method="linear" if np.isfinite(a).all() else "higher"))


def rank_floor(n_old: int, n_new: int) -> float:
    """The smallest one-sided p-value a rank test of n_old against n_new rounds can give: every new
    round above every old one, 1 of C(n_old + n_new, n_new) arrangements."""
    if n_old < 1 or n_new < 1:
        return 1.0
    return 1.0 / math.comb(n_old + n_new, n_new)


def reachable_p(old: Sequence[float], new: Sequence[float], shift: float) -> float:
    """The smallest p-value `shift_p(old, new, shift, "greater")` could give over every way of
    labelling these same values OLD and NEW: the largest ones all NEW's. Tied values (counts, rates
    in steps) reach less far than 1 / C(n_old + n_new, n_new); a measure whose values cannot reach
    the level spends none of it (Tarone 1990, conditional on the values, as the permutation is)."""
    if not old or not new:
        return 1.0
    pooled = sorted([*(float(x) - shift for x in new), *(float(x) for x in old)])
    k = len(pooled) - len(new)
    return shift_p(pooled[:k], pooled[k:], 0.0, "greater")


def rounds_needed(level: float, floor: Callable[[int, int], float] = rank_floor) -> int:
    """Rounds per side for the most extreme outcome to reach `level` (5 for 0.05/12, 6 for 0.05/13)."""
    for n in range(2, MAX_ROUNDS):
        if floor(n, n) <= level:
            return n
    return MAX_ROUNDS


def _ties(a: np.ndarray, b: np.ndarray) -> bool:
    both = np.concatenate([a, b])
    return len(np.unique(both)) < len(both)


def shift_p(old: Sequence[float], new: Sequence[float], shift: float, alternative: str) -> float:
    """One-sided Mann-Whitney U p-value of NEW - shift against OLD: 'greater' asks whether new
    exceeds old by more than `shift`, 'less' whether it falls short of it. Exact without ties; with
    ties, every arrangement's U (the exact permutation distribution) while there are at most
    PERMUTATIONS of them (7 + 7 rounds), else scipy's normal approximation with the tie correction."""
    a, b = np.asarray(new, dtype=float) - shift, np.asarray(old, dtype=float)
    method: object = "exact"
    if _ties(a, b):
        if math.comb(len(a) + len(b), len(a)) <= PERMUTATIONS:
            method = stats.PermutationMethod(n_resamples=PERMUTATIONS, rng=np.random.default_rng(0))
        else:
            method = "asymptotic"
    res = stats.mannwhitneyu(a, b, alternative=alternative, method=method)
    return float(min(1.0, res.pvalue))


def hodges_lehmann(old: Sequence[float], new: Sequence[float]) -> float:
    """The Hodges-Lehmann shift: the median of every new - old difference."""
    d = np.subtract.outer(np.asarray(new, dtype=float), np.asarray(old, dtype=float))
    return float(np.median(d))


def _first(cands: np.ndarray, ok: Callable[[float], bool]) -> int:
    """The first index of sorted `cands` where `ok` (monotone: False ... True) holds; len if none."""
    lo, hi = 0, len(cands)
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(float(cands[mid])):
            hi = mid
        else:
            lo = mid + 1
    return lo


def shift_interval(old: Sequence[float], new: Sequence[float], level: float) -> tuple[float, float]:
    """The shifts d that neither one-sided `shift_p` test rejects at `level`: the confidence
    interval of the Hodges-Lehmann shift that agrees with the test (a shift of the tolerance outside
    it is a verdict). Its ends are new - old differences; -inf / +inf when the rounds are too few
    to exclude anything. Between two differences U is constant, so the midpoints are tried too."""
    d = np.unique(np.subtract.outer(np.asarray(new, dtype=float), np.asarray(old, dtype=float)))
    mids = (d[:-1] + d[1:]) / 2
    c = np.sort(np.concatenate([d, mids]))
    far = float(d[-1] - d[0]) + 1.0
    # lower end: the least difference from which on `greater` no longer rejects
    i = _first(c, lambda s: shift_p(old, new, s, "greater") > level)
    if i == 0:
        lower = -math.inf if shift_p(old, new, float(d[0]) - far, "greater") > level else float(d[0])
    else:
        lower = float(d[d <= c[i]][-1])
    # upper end, mirrored: the greatest difference up to which `less` does not reject
    j = _first(c, lambda s: shift_p(old, new, s, "less") <= level)
    if j == len(c):
        upper = math.inf if shift_p(old, new, float(d[-1]) + far, "less") > level else float(d[-1])
    else:
        upper = float(d[d >= c[max(j - 1, 0)]][0])
    return lower, upper


def promise_p(old: tuple[int, int], new: tuple[int, int], alternative: str) -> float:
    """Boschloo's exact test of (broken, judged) rounds: 'greater' asks whether NEW breaks the
    promise in a larger share of its rounds than OLD."""
    (ob, oj), (nb, nj) = old, new
    if oj == 0 or nj == 0:
        return 1.0
    table = [[nb, ob], [nj - nb, oj - ob]]  # columns: the two samples (new, old)
    res = stats.boschloo_exact(table, alternative=alternative)
    p = float(res.pvalue)
    return 1.0 if math.isnan(p) else min(1.0, p)


def promise_floor(n_old: int, n_new: int) -> float:
    """The smallest p-value `promise_p` can give: broken in every new round, in no old one."""
    if n_old < 1 or n_new < 1:
        return 1.0
    return promise_p((0, n_old), (n_new, n_new), "greater")


def promise_reachable(old: tuple[int, int], new: tuple[int, int]) -> float:
    """The smallest p-value `promise_p` could give for the same number of broken rounds, all of
    them NEW's (Tarone's margin: a promise broken once in ten rounds cannot be a regression)."""
    (ob, oj), (nb, nj) = old, new
    broken = ob + nb
    in_new = min(broken, nj)
    return promise_p((min(broken - in_new, oj), oj), (in_new, nj), "greater")


@dataclass(frozen=True)
class Family:
    """Which tests share the error budget, and the level each is tested at (Tarone 1990): the
    least K with at most K tests whose smallest reachable p-value is <= alpha / K; only those are
    tested, each at alpha / K. A test that cannot reach it is `not enough rounds`."""

    size: int
    level: float

    @classmethod
    def of(cls, floors: Sequence[float], alpha: float = ALPHA) -> Family:
        for k in range(1, len(floors) + 1):
            if sum(f <= alpha / k for f in floors) <= k:
                return cls(k, alpha / k)
        return cls(max(len(floors), 1), alpha / max(len(floors), 1))

    def reachable(self, floor: float) -> bool:
        return floor <= self.level
