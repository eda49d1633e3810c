"""Stage 4: the per-run summaries (analysis/summary.json), assembled on the driver from a few rows
per run: counts, classes and evidence (example msg_ids per anomaly kind), never a pass or a fail.
The policy's limits are harness.verdict's checkers' (harness/verdict/checks/limits.py): they read
these counts, the examples and the policy recorded here as evidence."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from spark_analysis.attribution import faults_summary
from spark_analysis.facts import Facts
from spark_analysis.frames import grouped
from spark_analysis.guarantees import downgrades
from spark_analysis.ingest import FOREIGN, KNOWN_EVENTS, MALFORMED
from spark_analysis.inputs import RunInput
from spark_analysis.policy import Policy
from spark_analysis.statuses import EXTRA_STATUSES, GHOST_KINDS, STATUSES

Rows = dict[str, list[dict[str, Any]]]


def assemble(
    got: Rows,
    inputs: list[RunInput],
    facts: Facts,
    policy: Policy,
    engine: dict[str, Any],
) -> list[dict[str, Any]]:
    """One summary per run (the analysis/summary.json contract) from the collected aggregates;
    ``engine`` describes the Spark job."""
    examples = grouped(got["examples"], ["rk", "kind"], "msg_id")
    summaries = []
    for rk, inp in enumerate(inputs):
        summary = _counts(rk, got, facts)
        cube = [r for r in facts.cube if r["rk"] == rk]
        summary.update(
            latency_s=_latency(rk, got),
            subscriptions=_subscriptions(rk, facts),
            flows=_flows(rk, got, facts),
            faults=faults_summary(rk, got, inputs, facts, policy),
            malformed=_malformed(rk, inp, facts, cube, policy),
            ignored_records=sum(
                r["n"] for r in cube if r["event"] not in (*KNOWN_EVENTS, MALFORMED, FOREIGN)
            ),
            foreign_records=_foreign(cube),
            time_span=[facts.t_min.get(rk), facts.t_max.get(rk)],
            # the guarantee each agent's workload (run.json) demanded vs what it used
            downgrades=downgrades(inp.run_json, cube),
            # evidence for the verdict's limit checkers: example msg_ids per anomaly kind
            examples={kind: ids for (k, kind), ids in sorted(examples.items()) if k == rk},
            # the policy this reconciliation was given: its limits are the checkers' inputs
            policy=policy.to_dict(),
            run_dir=str(inp.run_dir),
            engine={**engine, "generated_at": time.time()},
        )
        summaries.append(summary)
    return summaries


def _counts(rk: int, got: Rows, facts: Facts) -> dict[str, Any]:
    """The run id, totals, deliveries per class, ghosts, per guarantee, unexpected, out of order."""
    rows = [r for r in got["rows"] if r["rk"] == rk]
    totals = {"attempted": 0, "acknowledged": 0, "dropped": 0, "in_doubt": 0, "conflicting": 0}
    for r in rows:
        if r["msg_row"] and r["state"] != "unexpected":
            totals["attempted"] += r["n"]
            totals[r["state"]] += r["n"]
            totals["conflicting"] += r["conflicting"]
    cube = [r for r in facts.cube if r["rk"] == rk]
    deliveries, ghosts, by_guarantee = _deliveries(rows)
    streams = [{k: v for k, v in st.items() if k != "rk"} for st in got["streams"] if st["rk"] == rk]
    streams.sort(key=lambda s: (s["subscriber"] or "", s["subscription"] or "", s["publisher"] or ""))
    return {
        "run": facts.run_ids[rk],
        "totals": {
            **totals,
            "records": sum(r["n"] for r in cube),
            "receipts": sum(r["n"] for r in cube if r["event"] == "received"),
        },
        "deliveries": deliveries,
        "unexpected": sum(r["n"] for r in rows if r["msg_row"] and r["state"] == "unexpected"),
        "unexpected_receipts": sum(r["receipts"] or 0 for r in rows if r["status"] == "unexpected"),
        "ghosts": ghosts,
        "by_guarantee": {g: {k: v for k, v in c.items() if v} for g, c in by_guarantee.items()},
        "out_of_order": {"total": sum(s["out_of_order"] for s in streams), "streams": streams},
    }


def _foreign(cube: list[dict[str, Any]]) -> dict[str, Any]:
    """Records naming another run than run.json's: counted here, never classified."""
    runs: dict[str, int] = {}
    for r in cube:
        if r["event"] == FOREIGN:
            runs[str(r["run"])] = runs.get(str(r["run"]), 0) + r["n"]
    return {"count": sum(runs.values()), "runs": dict(sorted(runs.items())[:5])}


def _deliveries(
    rows: list[dict[str, Any]],
) -> tuple[dict[str, int], dict[str, int], dict[str, dict[str, int]]]:
    """The (message, subscription) pairs per class, the ghosts per kind, the classes per guarantee."""
    deliveries: dict[str, int] = {"expected": 0, **{k: 0 for k in STATUSES + EXTRA_STATUSES}}
    deliveries.update(observed_only=0, duplicate_receipts=0)
    ghosts = {k: 0 for k in GHOST_KINDS}
    by_guarantee: dict[str, dict[str, int]] = {
        g: {k: 0 for k in STATUSES + EXTRA_STATUSES} for g in ("at-least-once", "best-effort")
    }
    for r in rows:
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
    return deliveries, ghosts, by_guarantee


def _latency(rk: int, got: Rows) -> dict[str, Any]:
    latency: dict[str, Any] = {"p50": None, "p95": None, "p99": None, "max": None, "count": 0}
    for r in got["latency"]:
        if r["rk"] == rk and r["n"]:
            p = r["p"]
            latency = {"p50": p[0], "p95": p[1], "p99": p[2], "max": r["max"], "count": r["n"]}
    # [bin, receipts]: bin b holds latencies in [10^(b/4), 10^((b+1)/4)) s (aggregates.latency_bin)
    latency["histogram"] = sorted([r["bin"], r["n"]] for r in got.get("latency_bins", []) if r["rk"] == rk)
    return latency


def _subscriptions(rk: int, facts: Facts) -> list[dict[str, Any]]:
    return [
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
    ]


def _malformed(
    rk: int, inp: RunInput, facts: Facts, cube: list[dict[str, Any]], policy: Policy
) -> dict[str, Any]:
    by_reason: dict[str, int] = defaultdict(int)
    for r in cube:
        if r["event"] == MALFORMED:
            by_reason[r["bad_reason"]] += r["n"]
    if inp.fault_lines_malformed:
        by_reason["faults_log"] = inp.fault_lines_malformed
    examples = [
        {"file": _short_path(e["file"], inp.run_dir), "reason": e["bad_reason"], "line": e["raw"]}
        for e in sorted((r for r in facts.malformed_rows if r["rk"] == rk), key=lambda r: r["_rn"])
    ] + [{"file": "faults.jsonl", "reason": "faults_log", "line": x} for x in inp.fault_examples]
    return {
        "count": sum(by_reason.values()),
        "by_reason": dict(sorted(by_reason.items())),
        "examples": examples[: policy.examples],
    }


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
