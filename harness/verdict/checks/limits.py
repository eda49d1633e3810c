"""The verdict policy's limits, applied to the reconciliation's counts (analysis/summary.json).

The reconciliation counts and classifies (lost, unexpected, ghosts, duplicated, ...) and keeps
example msg_ids per kind (`examples`); it never decides. Here each anomaly kind meets its limit
from the policy the run was reconciled with (summary.json `policy`, spark_analysis/policy.py's
keys and defaults): over the limit it is a violation, the checkers of counts.py turn it into a
failed promise; under it (or with no limit) it is reported only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spark_analysis.guarantees import describe
from spark_analysis.policy import Policy

#: the policy's defaults (the one owner: spark_analysis/policy.py), for a summary that records none
DEFAULTS: dict[str, Any] = Policy().to_dict()

Summary = dict[str, Any]


@dataclass(frozen=True)
class Limit:
    kind: str
    what: str
    count: Callable[[Summary], int]
    #: the policy key of its limit; None: reported, never a violation
    key: str | None = None


def _d(status: str) -> Callable[[Summary], int]:
    return lambda s: int((s.get("deliveries") or {}).get(status) or 0)


def _g(kind: str) -> Callable[[Summary], int]:
    return lambda s: int((s.get("ghosts") or {}).get(kind) or 0)


def _vacuous(s: Summary) -> list[str]:
    return [str(f.get("fault_id")) for f in s.get("faults") or [] if isinstance(f, dict) and f.get("vacuous")]


#: in the order the reconciliation reported them before the verdict owned the limits
LIMITS: tuple[Limit, ...] = (
    Limit("lost", "acknowledged at-least-once deliveries never received", _d("lost"), "max_lost"),
    Limit(
        "unexpected",
        "received msg_ids never attempted",
        lambda s: int(s.get("unexpected") or 0),
        "max_unexpected",
    ),
    Limit(
        "ghost_timeout", "received although the publisher dropped them", _g("timeout"), "max_ghost_timeout"
    ),
    Limit(
        "ghost_dropped_other",
        "received although the publisher dropped them (other reasons)",
        _g("dropped_other"),
        "max_ghost_dropped_other",
    ),
    Limit(
        "ghost_in_doubt",
        "received although never acknowledged (publisher died or gave up silently)",
        _g("in_doubt"),
        "max_ghost_in_doubt",
    ),
    Limit("duplicated", "deliveries received more than once", _d("duplicated"), "max_duplicates"),
    Limit(
        "misrouted",
        "received on a subscription whose filter does not match the topic",
        _d("misrouted"),
        "max_misrouted",
    ),
    Limit(
        "malformed",
        "log records rejected",
        lambda s: int((s.get("malformed") or {}).get("count") or 0),
        "max_malformed",
    ),
    Limit("missed", "best-effort deliveries never received", _d("missed")),
    Limit("dropped_expected", "dropped by the publisher, never received", _d("dropped_expected")),
    Limit("in_doubt_missing", "in-doubt messages never received", _d("in_doubt_missing")),
    Limit("extra", "received on a matching subscription made after the first attempt", _d("extra")),
    Limit(
        "conflicting",
        "messages logged both sent and dropped",
        lambda s: int((s.get("totals") or {}).get("conflicting") or 0),
    ),
    Limit(
        "out_of_order",
        "first receipts arriving after a later-sent message of the same publisher",
        lambda s: int((s.get("out_of_order") or {}).get("total") or 0),
    ),
    Limit(
        "downgraded",
        "publications/subscriptions with a weaker QoS or durability than the workload asked for",
        lambda s: len(s.get("downgrades") or []),
        "max_downgrades",
    ),
    Limit(
        "vacuous_fault",
        "fault windows with no acknowledged send or no receipt: they prove nothing",
        lambda s: len(_vacuous(s)),
        "fail_on_vacuous",
    ),
)


def policy_of(summary: Summary) -> dict[str, Any]:
    """The policy the run was reconciled with (its recorded keys over the defaults)."""
    recorded = summary.get("policy")
    return {**DEFAULTS, **(recorded if isinstance(recorded, dict) else {})}


def limit_of(lim: Limit, policy: dict[str, Any]) -> int | None:
    if lim.key is None:
        return None
    if lim.key == "fail_on_vacuous":
        return 0 if policy.get("fail_on_vacuous") else None
    value = policy.get(lim.key)
    return None if value is None else int(value)


def anomalies(summary: Summary) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(violations, reported): `{kind, count, limit, examples, what}` per anomaly kind present;
    a violation's count is over its limit, the rest is reported but tolerated."""
    pol = policy_of(summary)
    over: list[dict[str, Any]] = []
    reported: list[dict[str, Any]] = []
    for lim in LIMITS:
        count = lim.count(summary)
        if count <= 0:
            continue
        limit = limit_of(lim, pol)
        what = lim.what
        if lim.kind == "ghost_timeout":
            what += " (" + ", ".join(pol.get("ghost_timeout_reasons") or []) + ")"
        item = {
            "kind": lim.kind,
            "count": count,
            "limit": limit,
            "examples": _examples(summary, lim.kind, pol),
            "what": what,
        }
        (over if limit is not None and count > limit else reported).append(item)
    return over, reported


def _examples(summary: Summary, kind: str, pol: dict[str, Any]) -> list[str]:
    """The evidence the reconciliation kept for `kind`."""
    n = int(pol.get("examples") or 5)
    if kind == "malformed":
        return [str(e.get("line")) for e in (summary.get("malformed") or {}).get("examples") or []]
    if kind == "out_of_order":
        streams = (summary.get("out_of_order") or {}).get("streams") or []
        return [e for st in streams for e in st.get("examples") or []][:n]
    if kind == "downgraded":
        return [describe(x) if isinstance(x, dict) else str(x) for x in summary.get("downgrades") or []][:n]
    if kind == "vacuous_fault":
        return _vacuous(summary)[:n]
    kept = summary.get("examples")
    if isinstance(kept, dict):
        return [str(x) for x in kept.get(kind) or []]
    # a summary reconciled before the verdict owned the limits kept its examples in reasons/warnings
    for it in [*(summary.get("reasons") or []), *(summary.get("warnings") or [])]:
        if isinstance(it, dict) and it.get("kind") == kind:
            return [str(x) for x in it.get("examples") or []]
    return []
