"""MQTT topic-filter matching, on the driver: distinct topics x distinct filters are few, and the
pairs stage joins the result as a literal table (spark_analysis.pairs).

Semantics (MQTT 3.1.1 §4.7): levels are separated by ``/`` (empty levels count);
``+`` matches exactly one level; ``#`` (last level only) matches the parent level and any number
of child levels (``a/#`` matches ``a``, ``a/b``, ``a/b/c``); filters starting with a wildcard do
not match topics whose first level starts with ``$``. Any other character is literal.
"""

from __future__ import annotations


def matches(topic_filter: str, topic: str) -> bool:
    """Does the MQTT filter ``topic_filter`` match ``topic``?"""
    f = topic_filter.split("/")
    t = topic.split("/")
    if t[0].startswith("$") and f[0] in ("+", "#"):
        return False
    if f[-1] == "#":
        k = len(f) - 1
        return len(t) >= k and all(f[i] in ("+", t[i]) for i in range(k))
    return len(t) == len(f) and all(a in ("+", b) for a, b in zip(f, t, strict=True))
