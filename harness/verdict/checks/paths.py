"""Per-path accounting: every delivery flow a run measured (a traffic family from its publisher on
one group to a subscription on another: a path x family), its pairs counted from the
reconciliation's `flows`, judged against what the topology requires of it (run.json
scenario.params.paths, written by harness/coverage with the static prediction's `why` and, when
it knows it, the bridge and filter that block the family: `blocked_by`)."""

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
    """One cell per path entry (a path x family): counts, its state (ok | lost | dup | dropped |
    delivered | not_exercised | quiet) and whether it broke what the topology requires (`ok`)."""
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
            "family": p.get("family") or "",
            "must": must,
            "routable": p.get("routable", True),
            "why": p.get("why", ""),
            "expected": expected,
            "delivered": delivered,
            "lost": lost,
            "duplicated": dup,
            "dropped": dropped,
        }
        if p.get("blocked_by"):
            cell["blocked_by"] = p["blocked_by"]
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


def label(cell: dict[str, Any]) -> str:
    """`hub → east [topology]` (a bare path for a run measured without families)."""
    return f"{cell['path']} [{cell['family']}]" if cell.get("family") else str(cell["path"])


def blocked(cell: dict[str, Any]) -> str:
    """What the static prediction says blocks the flow (the bridge and its filter when known)."""
    b = cell.get("blocked_by")
    if isinstance(b, dict) and b.get("text"):
        return str(b["text"])
    if isinstance(b, dict):
        return ", ".join(f"{k} {v}" for k, v in b.items() if v not in (None, ""))
    if b:
        return str(b)
    return "" if cell.get("routable", True) else str(cell.get("why") or "")


def what(cell: dict[str, Any]) -> str:
    """One failed flow in a line: `path hub → east [topology]: lost 40 of 40 (must deliver);
    predicted: <the bridge and filter>`."""
    out = f"path {label(cell)}: {describe(cell)}" + (" (must deliver)" if cell["must"] == "deliver" else "")
    why = blocked(cell)
    return out + (f"; predicted: {why}" if why else "")


def paths(v: RunView) -> Check:
    declared = v.params.get("paths")
    if not isinstance(declared, list) or not declared:
        return not_applicable("paths", "the run measured no delivery paths")
    cells = path_cells(v.summary, [p for p in declared if isinstance(p, dict)])
    bad = [
        {
            "path": c["path"],
            "family": c["family"],
            "what": what(c),
            **{k: c[k] for k in ("expected", "lost", "delivered")},
            **({"blocked_by": blocked(c)} if blocked(c) else {}),
        }
        for c in cells
        if not c["ok"]
    ]
    ok = sum(c["ok"] for c in cells)
    kind = "flows (path x family)" if any(c["family"] for c in cells) else "paths"
    if not bad:
        return Check("paths", count=0, detail=f"{ok} of {len(cells)} {kind} as required")
    return Check(
        "paths",
        "fail",
        len(bad),
        bad,
        None,
        f"{len(bad)} of {len(cells)} delivery {kind} broke what the topology requires: " + _by_family(cells),
    )


def _by_family(cells: list[dict[str, Any]]) -> str:
    """`topology (hub → east: lost 40 of 40), tenant (...)`: the failed flows, family by family."""
    fams: dict[str, list[str]] = {}
    for c in cells:
        if not c["ok"]:
            fams.setdefault(c["family"] or "paths", []).append(f"{c['path']}: {describe(c)}")
    return ", ".join(f"{f} ({'; '.join(ps)})" for f, ps in fams.items())
