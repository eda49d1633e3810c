"""Stage 4: the per-run summaries (analysis/summary.json), assembled on the driver from a few rows
per run, and the policy's limits checked against them (``reasons``: violations, ``warnings``:
reported but tolerated). The verdict itself is harness.verdict's: it reads these as evidence."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from spark_analysis.attribution import faults_summary
from spark_analysis.facts import Facts
from spark_analysis.frames import grouped
from spark_analysis.guarantees import describe, downgrades
from spark_analysis.ingest import KNOWN_EVENTS, MALFORMED
from spark_analysis.inputs import RunInput
from spark_analysis.policy import Policy
from spark_analysis.statuses import EXTRA_STATUSES, GHOST_KINDS, STATUSES


def assemble(
    got: dict[str, list[dict[str, Any]]],
    inputs: list[RunInput],
    facts: Facts,
    policy: Policy,
    engine: dict[str, Any],
) -> list[dict[str, Any]]:
    """One summary per run (the analysis/summary.json contract) from the collected aggregates,
    with the policy's reasons and warnings; ``engine`` describes the Spark job."""
    pol = policy
    examples = grouped(got["examples"], ["rk", "kind"], "msg_id")
    summaries = []
    for rk, inp in enumerate(inputs):
        rows = [r for r in got["rows"] if r["rk"] == rk]
        totals = {"attempted": 0, "acknowledged": 0, "dropped": 0, "in_doubt": 0, "conflicting": 0}
        deliveries: dict[str, int] = {"expected": 0, **{k: 0 for k in STATUSES + EXTRA_STATUSES}}
        deliveries.update(observed_only=0, duplicate_receipts=0)
        ghosts = {k: 0 for k in GHOST_KINDS}
        by_guarantee: dict[str, dict[str, int]] = {
            g: {k: 0 for k in STATUSES + EXTRA_STATUSES} for g in ("at-least-once", "best-effort")
        }
        for r in rows:
            if r["msg_row"] and r["state"] != "unexpected":
                totals["attempted"] += r["n"]
                totals[r["state"]] += r["n"]
                totals["conflicting"] += r["conflicting"]
            if r["expected"]:
                deliveries["expected"] += r["n"]
            status = r["status"]
            if status is None or status == "unexpected":
                continue
            deliveries[status] += r["n"]
            if not r["expected"]:
                deliveries["observed_only"] += r["n"]
            if status == "ghost":
                ghosts[r["ghost_kind"]] += r["n"]
            if status == "duplicated":
                deliveries["duplicate_receipts"] += (r["receipts"] or 0) - r["n"]
            if r["guarantee"] in by_guarantee:
                by_guarantee[r["guarantee"]][status] += r["n"]
        unexpected = sum(r["n"] for r in rows if r["msg_row"] and r["state"] == "unexpected")
        unexpected_receipts = sum(r["receipts"] or 0 for r in rows if r["status"] == "unexpected")
        latency: dict[str, Any] = {"p50": None, "p95": None, "p99": None, "max": None, "count": 0}
        for r in got["latency"]:
            if r["rk"] == rk and r["n"]:
                p = r["p"]
                latency = {"p50": p[0], "p95": p[1], "p99": p[2], "max": r["max"], "count": r["n"]}
        # [bin, receipts]: bin b holds latencies in [10^(b/4), 10^((b+1)/4)) s (aggregates.latency_bin)
        latency["histogram"] = sorted(
            [r["bin"], r["n"]] for r in got.get("latency_bins", []) if r["rk"] == rk
        )
        streams = [{k: v for k, v in st.items() if k != "rk"} for st in got["streams"] if st["rk"] == rk]
        streams.sort(key=lambda s: (s["subscriber"] or "", s["subscription"] or "", s["publisher"] or ""))
        cube = [r for r in facts.cube if r["rk"] == rk]
        by_reason: dict[str, int] = defaultdict(int)
        for r in cube:
            if r["event"] == MALFORMED:
                by_reason[r["bad_reason"]] += r["n"]
        if inp.fault_lines_malformed:
            by_reason["faults_log"] = inp.fault_lines_malformed
        mal_examples = [
            {"file": _short_path(e["file"], inp.run_dir), "reason": e["bad_reason"], "line": e["raw"]}
            for e in sorted((r for r in facts.malformed_rows if r["rk"] == rk), key=lambda r: r["_rn"])
        ] + [{"file": "faults.jsonl", "reason": "faults_log", "line": x} for x in inp.fault_examples]

        def ex(kind: str, _rk: int = rk) -> list[str]:
            return examples.get((_rk, kind), [])

        summary: dict[str, Any] = {
            "run": facts.run_ids[rk],
            "totals": {
                **totals,
                "records": sum(r["n"] for r in cube),
                "receipts": sum(r["n"] for r in cube if r["event"] == "received"),
            },
            "deliveries": deliveries,
            "unexpected": unexpected,
            "unexpected_receipts": unexpected_receipts,
            "ghosts": ghosts,
            "by_guarantee": {g: {k: v for k, v in c.items() if v} for g, c in by_guarantee.items()},
            "latency_s": latency,
            "out_of_order": {"total": sum(s["out_of_order"] for s in streams), "streams": streams},
            "subscriptions": [
                {
                    "agent": s["agent"],
                    "filter": s["filter"],
                    "durable": s["durable"],
                    "qos": s["qos"],
                    "first_subscribed_ts": s["first_ts"],
                    "subscribed_count": s["subscribed_count"],
                    "receipts": s["receipts"],
                }
                for s in facts.subs
                if s["rk"] == rk
            ],
            "flows": _flows(rk, got, facts),
            "faults": faults_summary(rk, got, inputs, facts, policy),
            "malformed": {
                "count": sum(by_reason.values()),
                "by_reason": dict(sorted(by_reason.items())),
                "examples": mal_examples[: pol.examples],
            },
            "ignored_records": sum(
                r["n"] for r in cube if r["event"] not in KNOWN_EVENTS and r["event"] != MALFORMED
            ),
            "time_span": [facts.t_min.get(rk), facts.t_max.get(rk)],
            # the guarantee each agent's workload (run.json) demanded vs what it used
            "downgrades": downgrades(inp.run_json, cube),
        }
        # the policy's limits; the verdict is harness.verdict's (it reads these as evidence)
        reasons, warnings = judge(summary, pol, ex)
        summary["reasons"] = reasons
        summary["warnings"] = warnings
        summary["policy"] = pol.to_dict()
        summary["run_dir"] = str(inp.run_dir)
        summary["engine"] = {**engine, "generated_at": time.time()}
        summaries.append(summary)
    return summaries


def _flows(rk: int, got: dict[str, list[dict[str, Any]]], facts: Facts) -> list[dict[str, Any]]:
    """Per (publisher agent, subscription): how many pairs of each class (ok, lost, ...) and the
    receipts; the verdict maps agents to groups for its per-path accounting."""
    names = {(r["rk"], r["pub_h"]): r["publisher"] for r in got.get("publishers", [])}
    flows: dict[tuple[str | None, int], dict[str, Any]] = {}
    for r in got.get("flows", []):
        if r["rk"] != rk:
            continue
        sub = facts.sub_at.get((rk, r["sub_index"])) or {}
        pub = names.get((rk, r["pub_h"]))
        f = flows.setdefault(
            (pub, r["sub_index"]),
            {
                "publisher": pub,
                "subscriber": sub.get("agent"),
                "subscription": sub.get("filter"),
                "receipts": 0,
            },
        )
        f[r["status"]] = f.get(r["status"], 0) + r["n"]
        f["receipts"] += r["receipts"] or 0
    return sorted(
        flows.values(), key=lambda f: (f["publisher"] or "", f["subscriber"] or "", f["subscription"] or "")
    )


def _short_path(path: str | None, run_dir: Path) -> str | None:
    if not path:
        return path
    p = path.removeprefix("file://")
    try:
        return str(Path(p).relative_to(run_dir))
    except ValueError:  # staged before the run folder was moved or copied: agents/<agent>/...
        cut = p.rfind("/agents/")
        return p[cut + 1 :] if cut >= 0 else p


def judge(summary: dict[str, Any], pol: Policy, ex: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Violations (``reasons``) and reported-but-tolerated anomalies (``warnings``)."""
    d, g = summary["deliveries"], summary["ghosts"]
    reasons: list[dict[str, Any]] = []
    warnings: list[dict[str, Any]] = []

    def check(kind: str, count: int, limit: int | None, examples: list[str], what: str) -> None:
        if count <= 0:
            return
        item = {"kind": kind, "count": count, "limit": limit, "examples": examples, "what": what}
        (reasons if limit is not None and count > limit else warnings).append(item)

    check("lost", d["lost"], pol.max_lost, ex("lost"), "acknowledged at-least-once deliveries never received")
    check(
        "unexpected",
        summary["unexpected"],
        pol.max_unexpected,
        ex("unexpected"),
        "received msg_ids never attempted",
    )
    check(
        "ghost_timeout",
        g["timeout"],
        pol.max_ghost_timeout,
        ex("ghost_timeout"),
        "received although the publisher dropped them (" + ", ".join(pol.ghost_timeout_reasons) + ")",
    )
    check(
        "ghost_dropped_other",
        g["dropped_other"],
        pol.max_ghost_dropped_other,
        ex("ghost_dropped_other"),
        "received although the publisher dropped them (other reasons)",
    )
    check(
        "ghost_in_doubt",
        g["in_doubt"],
        pol.max_ghost_in_doubt,
        ex("ghost_in_doubt"),
        "received although never acknowledged (publisher died or gave up silently)",
    )
    check(
        "duplicated",
        d["duplicated"],
        pol.max_duplicates,
        ex("duplicated"),
        "deliveries received more than once",
    )
    check(
        "misrouted",
        d["misrouted"],
        pol.max_misrouted,
        ex("misrouted"),
        "received on a subscription whose filter does not match the topic",
    )
    check(
        "malformed",
        summary["malformed"]["count"],
        pol.max_malformed,
        [e["line"] for e in summary["malformed"]["examples"]],
        "log records rejected",
    )
    check("missed", d["missed"], None, ex("missed"), "best-effort deliveries never received")
    check(
        "dropped_expected",
        d["dropped_expected"],
        None,
        ex("dropped_expected"),
        "dropped by the publisher, never received",
    )
    check(
        "in_doubt_missing",
        d["in_doubt_missing"],
        None,
        ex("in_doubt_missing"),
        "in-doubt messages never received",
    )
    check(
        "extra",
        d["extra"],
        None,
        ex("extra"),
        "received on a matching subscription made after the first attempt",
    )
    check("conflicting", summary["totals"]["conflicting"], None, [], "messages logged both sent and dropped")
    check(
        "out_of_order",
        summary["out_of_order"]["total"],
        None,
        [e for s in summary["out_of_order"]["streams"] for e in s["examples"]][: pol.examples],
        "first receipts arriving after a later-sent message of the same publisher",
    )
    weaker = summary.get("downgrades", [])
    check(
        "downgraded",
        len(weaker),
        pol.max_downgrades,
        [describe(x) for x in weaker][: pol.examples],
        "publications/subscriptions with a weaker QoS or durability than the workload asked for",
    )
    vac = [f["fault_id"] for f in summary["faults"] if f["vacuous"]]
    check(
        "vacuous_fault",
        len(vac),
        0 if pol.fail_on_vacuous else None,
        vac[: pol.examples],
        "fault windows with no acknowledged send or no receipt: they prove nothing",
    )
    return reasons, warnings


# --------------------------------------------------------------------------------------------
# public API and command line
# --------------------------------------------------------------------------------------------
