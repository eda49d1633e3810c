"""MQTT topic-filter matching as a Spark SQL expression (no Python UDF).

Semantics (MQTT 3.1.1 §4.7): levels are separated by ``/`` (empty levels count);
``+`` matches exactly one level; ``#`` (last level only) matches the parent level and any number
of child levels (``a/#`` matches ``a``, ``a/b``, ``a/b/c``); filters starting with a wildcard do
not match topics whose first level starts with ``$``. Any other character is literal.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F


def match_expr(filter_col: str, topic_col: str) -> Column:
    """Boolean column: does the MQTT filter in ``filter_col`` match the topic in ``topic_col``?"""
    f = f"split({filter_col}, '/', -1)"
    t = f"split({topic_col}, '/', -1)"
    level_ok = f"(get({f}, i) = '+' OR get({f}, i) = get({t}, i))"
    multi = f"(element_at({f}, -1) = '#')"
    k = f"(size({f}) - 1)"
    sql = f"""
    CASE
      WHEN {topic_col} IS NULL OR {filter_col} IS NULL THEN false
      WHEN startswith(get({t}, 0), '$') AND get({f}, 0) IN ('+', '#') THEN false
      WHEN {multi} THEN size({t}) >= {k}
           AND ({k} = 0 OR forall(sequence(0, greatest({k} - 1, 0)), i -> {level_ok}))
      ELSE size({t}) = size({f})
           AND forall(sequence(0, size({f}) - 1), i -> {level_ok})
    END
    """
    return F.coalesce(F.expr(sql), F.lit(False))


def match_py(topic_filter: str, topic: str) -> bool:
    """Pure-Python twin of :func:`match_expr` (documentation and tests)."""
    f = topic_filter.split("/")
    t = topic.split("/")
    if t[0].startswith("$") and f[0] in ("+", "#"):
        return False
    if f[-1] == "#":
        k = len(f) - 1
        return len(t) >= k and all(f[i] in ("+", t[i]) for i in range(k))
    return len(t) == len(f) and all(a in ("+", b) for a, b in zip(f, t, strict=True))
