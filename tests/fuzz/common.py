"""Shared pieces of the fuzz tests: hostile scalar values and a structure-aware mutator of
parsed YAML/JSON documents (replace, delete or add at a random key path)."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([0, -1, 65535, 65536, 70000, 2**63, 10**40, 10**300]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["", "~nosuchuser/x", "/dev/zero", ".", "a" * 40, "a-1", "B-1", "mqtt", "\x00", "${x}"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path in a parsed document (the root included)."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += paths(v, prefix + (i,))
    return out


@st.composite
def mutated(draw: st.DrawFn, doc: Any, keys: list[str]) -> Any:
    """`doc` with one to three edits at random paths: a value replaced, a key/item deleted,
    a (known or random) key added, an item duplicated."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths(doc)))
        parent: Any = doc
        for part in path[:-1]:
            parent = parent[part]
        op = draw(st.sampled_from(["replace", "delete", "add", "duplicate"]))
        target = parent[path[-1]] if path else doc
        if not path:
            if op == "replace":
                doc = draw(VALUES)
            continue
        if op == "replace":
            parent[path[-1]] = draw(VALUES)
        elif op == "delete":
            del parent[path[-1]]
        elif op == "add" and isinstance(target, dict):
            target[draw(st.sampled_from(keys) | st.text(max_size=8))] = draw(VALUES)
        elif op == "duplicate" and isinstance(target, list) and target:
            target.append(copy.deepcopy(target[draw(st.integers(0, len(target) - 1))]))
    return doc


class Tally(Counter[str]):
    """Cases tried, per outcome; printed at the end of each fuzz test."""

    def report(self, name: str) -> str:
        parts = ", ".join(f"{v} {k}" for k, v in sorted(self.items()) if k != "cases")
        return f"{name}: {self['cases']} cases ({parts})"
