"""The per-source TTL search (harness/topology/routing.py) against every simple route, on random
small networks: the same pairs are routable, with the same hop counts."""

from __future__ import annotations

import random
from typing import Any

from harness.topology import parse_topology
from harness.topology.paths import predict
from harness.topology.routing import hops_of, routes


def _random_topology(rng: random.Random, n: int) -> dict[str, Any]:
    names = [f"g{i}" for i in range(n)]
    pairs = rng.sample([(a, b) for a in names for b in names if a != b], rng.randint(n - 1, 2 * n))
    bridges = []
    for a, b in pairs:
        br: dict[str, Any] = {"from": a, "to": b, "uri": "static", "duplex": rng.random() < 0.4}
        br["network_ttl"] = rng.randint(1, 3)
        attrs = {k: rng.randint(1, 4) for k in ("consumerTTL", "messageTTL") if rng.random() < 0.3}
        if attrs:
            br["attributes"] = attrs
        bridges.append(br)
    return {"name": "r", "groups": [{"name": g, "kind": "standalone"} for g in names], "bridges": bridges}


def _brute(hops: list[Any], src: str, dst: str) -> int:
    """The fewest hops of a simple route every hop's TTLs accept (-1: none)."""
    for r in routes(hops, src, dst):
        k = len(r)
        if all(h.consumer_ttl > k - i and h.message_ttl > i - 1 for i, h in enumerate(r, 1)):
            return k
    return -1


def test_search_matches_enumeration() -> None:
    rng = random.Random(40)
    checked = 0
    for _ in range(150):
        t = parse_topology(_random_topology(rng, rng.randint(3, 6)), "r")
        hops = hops_of(t)
        for p in predict(t):
            if p.source == p.target:
                continue
            want = _brute(hops, p.source, p.target)
            assert (p.hops if p.routable else -1) == want, (t.bridges, p)
            checked += 1
    assert checked > 1000
