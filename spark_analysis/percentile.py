"""The nearest-rank percentile, for the few values summarized on the driver (the report's and the
verdict's recovery figures); Spark's own percentiles cover the rows (spark_analysis.aggregates)."""

from __future__ import annotations

import math
from collections.abc import Iterable


def nearest_rank(xs: Iterable[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of a non-empty collection: the least value with at least
    q % of the values at or below it."""
    s = sorted(xs)
    if not s:
        raise ValueError("no values")
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]
