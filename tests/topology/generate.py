"""Generated topologies for scale tests and benchmarks/bench_topology.py: `n` chained groups."""

from __future__ import annotations

from typing import Any


def chain(n: int, duplex: bool = False, network_ttl: int = 1, kind: str = "standalone") -> dict[str, Any]:
    """Groups g0 .. g<n-1>, each bridged to the next (`static` URI: one target broker). With the
    defaults only g<i> -> g<i+1> routes: n * (n - 1) - (n - 1) pairs that must deliver do not."""
    return {
        "name": f"chain-{n}",
        "groups": [{"name": f"g{i}", "kind": kind} for i in range(n)],
        "bridges": [
            {
                "from": f"g{i}",
                "to": f"g{i + 1}",
                "uri": "static",
                "duplex": duplex,
                "network_ttl": network_ttl,
            }
            for i in range(n - 1)
        ],
    }
