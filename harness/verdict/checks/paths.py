"""Per-path accounting: every delivery path a run measured (publishers on one group, a subscription
on another), its pairs counted from the reconciliation's `flows`, judged against what the
topology requires of it (run.json scenario.params.paths, written by harness/coverage)."""

from __future__ import annotations

from typing import Any

from harness.verdict.checks.base import Check, not_applicable
from harness.verdict.view import RunView

DELIVERED = ("ok", "duplicated")
LOST = ("lost", "missed")


def _sum(flows: list[dict[str, Any]], keys: tuple[str, ...]) -> int:
    total = 0
    for f in flows:
        for k in keys:
            v = f.get(k)
            total += v if isinstance(v, int) and not isinstance(v, bool) else 0
    return total


def path_cells(summary: dict[str, Any], paths: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One cell per path: counts, its state (ok | lost | dup | dropped | delivered | not_exercised |
    quiet) and whether it broke what the topology requires (`ok`)."""
    flows = [f for f in summary.get("flows") or [] if isinstance(f, dict)]
    out = []
    for p in paths:
        mine = [
            f
            for f in flows
            if f.get("publisher") == p.get("publisher")
            and f.get("subscriber") == p.get("subscriber")
            and f.get("subscription") == p.get("subscription")
        ]
        expected = _sum(mine, ("ok", "duplicated", "lost", "missed", "dropped_expected", "in_doubt_missing"))
        delivered, lost = _sum(mine, DELIVERED), _sum(mine, LOST)
        dup, dropped = _sum(mine, ("duplicated",)), _sum(mine, ("dropped_expected",))
        must = p.get("must", "deliver")
        cell: dict[str, Any] = {
            "path": f"{p.get('from')} → {p.get('to')}",
            "from": p.get("from"),
            "to": p.get("to"),
            "must": must,
            "expected": expected,
            "delivered": delivered,
            "lost": lost,
            "duplicated": dup,
            "dropped": dropped,
        }
        if must == "not":
            cell["ok"] = delivered == 0
            cell["state"] = "delivered" if delivered else ("quiet" if expected else "not_exercised")
        else:
            exercised = expected > 0
            cell["ok"] = exercised and lost == 0 if must == "deliver" else True
            cell["state"] = (
                "not_exercised"
                if not exercised
                else "lost"
                if lost
                else "dropped"
                if dropped
                else "dup"
                if dup
                else "ok"
            )
        out.append(cell)
    return out


def describe(cell: dict[str, Any]) -> str:
    """A cell in a few words: `ok`, `lost 120 of 120`, `dup 3`, `not exercised`."""
    state = cell["state"]
    if state == "lost":
        return f"lost {cell['lost']} of {cell['expected']}"
    if state == "dup":
        return f"ok, dup {cell['duplicated']}"
    if state == "dropped":
        return f"ok, dropped {cell['dropped']}"
    if state == "delivered":
        return f"delivered {cell['delivered']} (must not)"
    return {"not_exercised": "not exercised", "quiet": "ok (nothing crossed)"}.get(state, state)


def paths(v: RunView) -> Check:
    declared = v.params.get("paths")
    if not isinstance(declared, list) or not declared:
        return not_applicable("paths", "the run measured no delivery paths")
    cells = path_cells(v.summary, [p for p in declared if isinstance(p, dict)])
    bad = [
        {
            "path": c["path"],
            "what": f"path {c['path']}: {describe(c)}"
            + (" (must deliver)" if c["must"] == "deliver" else ""),
            **{k: c[k] for k in ("expected", "lost", "delivered")},
        }
        for c in cells
        if not c["ok"]
    ]
    ok = sum(c["ok"] for c in cells)
    if not bad:
        return Check("paths", count=0, detail=f"{ok} of {len(cells)} paths as required")
    return Check(
        "paths",
        "fail",
        len(bad),
        bad,
        None,
        f"{len(bad)} of {len(cells)} delivery paths broke what the topology requires: "
        + "; ".join(b["what"] for b in bad[:4]),
    )
