"""Stage 3b: fault attribution. Per fault window (start to end plus the policy's settle time):
the anomalies whose first attempt falls in it, the successes of every role in it, and each role's
recovery (its first success at or after the fault's start)."""

from __future__ import annotations

import math
import os
from collections import defaultdict
from functools import reduce
from typing import Any

from spark_analysis.facts import Facts
from spark_analysis.frames import grouped, top, values
from spark_analysis.inputs import RunInput
from spark_analysis.policy import Policy
from spark_analysis.statuses import ANOMALY_STATUSES


def recovery_horizon_s() -> float:
    """Seconds after a fault's window searched for recoveries in the main job
    (``BFH_RECOVERY_HORIZON_S``, default 120); a later first success costs one more scan."""
    return max(0.0, float(os.environ.get("BFH_RECOVERY_HORIZON_S") or 120.0))


def _seconds(df: Any, start: str, end: str) -> Any:
    """``df`` with one row per whole second in [floor(start), floor(end)] (column ``sec``): turns a
    range join on time into an equi-join on (rk, sec)."""
    from pyspark.sql import functions as F

    last = F.least(F.floor(end), F.floor(start) + 2_000_000)
    return df.select("*", F.explode(F.sequence(F.floor(start), last)).alias("sec"))


def fault_windows(
    inputs: list[RunInput], facts: Facts, policy: Policy
) -> list[tuple[int, int, float, float]]:
    windows = []  # (rk, fault_idx, start, end of window incl. settle margin)
    for rk, inp in enumerate(inputs):
        for fi, f in enumerate(inp.faults):
            end = f.end if f.end is not None else max(facts.t_max.get(rk, f.start), f.start)
            windows.append((rk, fi, f.start, max(end, f.start) + policy.settle_s))
    return windows


def fault_frames(
    spark: Any, ev: Any, anomalies: Any, inputs: list[RunInput], facts: Facts, policy: Policy
) -> dict[str, Any]:
    """Per fault: the anomalies (of ``anomalies``, the non-ok pairs) whose first attempt falls
    in its window, and the successes of every role around it."""
    from pyspark.sql import functions as F

    col, pol = F.col, policy
    windows = fault_windows(inputs, facts, policy)
    if not windows:
        return {}
    fw = values(spark, windows, "rk int, fault_idx int, start double, wend double")
    fb = F.broadcast(_seconds(fw, "start", "wend"))
    frames: dict[str, Any] = {}
    # anomalies whose first attempt falls in [start, end + settle]
    an = (
        anomalies.where(col("first_attempt_ts").isNotNull())
        .withColumn("sec", F.floor("first_attempt_ts").cast("long"))
        .join(fb, ["rk", "sec"])
        .where(col("first_attempt_ts").between(col("start"), col("wend")))
    )
    frames["fault_anomalies"] = an.groupBy("rk", "fault_idx", "status").agg(F.count(F.lit(1)).alias("n"))
    frames["fault_examples"] = top(
        an.select("rk", "fault_idx", "status", "msg_id").distinct(),
        ["rk", "fault_idx", "status"],
        ["msg_id"],
        ["msg_id"],
        pol.examples,
    )
    frames["fault_roles"] = _fault_roles(ev, fw, windows)
    return frames


def _successes(ev: Any) -> Any:
    """Acknowledged sends (publisher) and receipts (subscriber:<filter>), per agent role."""
    from pyspark.sql import functions as F

    col = F.col
    return ev.where(col("event").isin("sent", "received")).select(
        "rk",
        "agent",
        F.when(col("event") == "received", col("subscription")).alias("sub"),
        (col("event") == "sent").alias("is_ack"),
        "ts",
    )


def _fault_roles(ev: Any, fw: Any, windows: list[tuple[int, int, float, float]]) -> Any:
    """Per fault and role: successes inside [start, end + settle] and the first one at or
    after the start, looked for up to :func:`recovery_horizon_s` after the window (later ones:
    :func:`late_recoveries`, only for the roles that need it)."""
    from pyspark.sql import functions as F

    col, horizon = F.col, recovery_horizon_s()
    succ = _successes(ev)
    if len(windows) <= 64:  # cheap range tests first: most successes are outside every window
        near = [
            (col("rk") == rk) & (col("ts") >= start) & (col("ts") <= wend + horizon)
            for rk, _, start, wend in windows
        ]
        succ = succ.where(reduce(lambda x, y: x | y, near))
    fb = F.broadcast(_seconds(fw.withColumn("horizon", col("wend") + horizon), "start", "horizon"))
    return (
        succ.withColumn("sec", F.floor("ts").cast("long"))
        .join(fb, ["rk", "sec"])
        .where(col("ts").between(col("start"), col("horizon")))
        .groupBy("rk", "fault_idx", "agent", "is_ack", "sub")
        .agg(F.min("ts").alias("t"), F.count(F.when(col("ts") <= col("wend"), 1)).alias("in_window"))
    )


def late_recoveries(
    spark: Any,
    ev: Any,
    got: dict[str, list[dict[str, Any]]],
    inputs: list[RunInput],
    facts: Facts,
    policy: Policy,
) -> None:
    """The first success after the horizon, for each (fault, role) with none before it: one
    more scan, only when some role recovered late or never."""
    from pyspark.sql import functions as F

    found = {(r["rk"], r["fault_idx"], r["agent"], r["is_ack"], r["sub"]) for r in got.get("fault_roles", [])}
    roles = {rk: facts.roles(rk) for rk in range(facts.runs)}
    horizon = recovery_horizon_s()
    last = _last_successes(facts)
    missing = [
        (rk, fi, agent, is_ack, sub, wend + horizon)
        for rk, fi, _, wend in fault_windows(inputs, facts, policy)
        for agent, is_ack, sub in roles[rk]
        if (rk, fi, agent, is_ack, sub) not in found
        # the facts know each role's last success: a role with none after the horizon needs no scan
        and last.get((rk, agent, is_ack, sub), -math.inf) > wend + horizon
    ]
    if not missing:
        return
    col = F.col
    want = values(
        spark,
        missing,
        "rk int, fault_idx int, agent string, is_ack boolean, wsub string, after double",
    )
    late = (
        _successes(ev)
        .join(F.broadcast(want), ["rk", "agent", "is_ack"])
        .where(col("sub").eqNullSafe(col("wsub")) & (col("ts") > col("after")))
        .groupBy("rk", "fault_idx", "agent", "is_ack", "sub")
        .agg(F.min("ts").alias("t"))
    )
    got["fault_roles"] = got.get("fault_roles", []) + [{**r.asDict(), "in_window": 0} for r in late.collect()]


def _last_successes(facts: Facts) -> dict[tuple[int, str, bool, str | None], float]:
    """The time of each role's last acknowledged send or receipt, from the facts' cube."""
    last: dict[tuple[int, str, bool, str | None], float] = {}
    for r in facts.cube:
        if r["event"] in ("sent", "received") and r["t1"] is not None:
            is_ack = r["event"] == "sent"
            key = (r["rk"], r["agent"], is_ack, None if is_ack else r["subscription"])
            last[key] = max(last.get(key, r["t1"]), r["t1"])
    return last


def faults_summary(
    rk: int, got: dict[str, list[dict[str, Any]]], inputs: list[RunInput], facts: Facts, policy: Policy
) -> list[dict[str, Any]]:
    """Per fault of run ``rk``: its window, the anomalies in it, each role's recovery time and
    whether the window is vacuous (no acknowledged send or no receipt in it)."""
    windows = [w for w in fault_windows(inputs, facts, policy) if w[0] == rk]
    if not windows:
        return []

    def role(r: dict[str, Any]) -> str:
        return "publisher" if r["is_ack"] else f"subscriber:{r['sub']}"

    rec: dict[tuple[int, str, str], float] = {}
    win: dict[int, dict[str, int]] = defaultdict(lambda: {"acked": 0, "received": 0})
    for r in got.get("fault_roles", []):
        if r["rk"] == rk:
            rec[(r["fault_idx"], r["agent"], role(r))] = r["t"]
            win[r["fault_idx"]]["acked" if r["is_ack"] else "received"] += r["in_window"]
    examples = grouped(
        [r for r in got.get("fault_examples", []) if r["rk"] == rk], ["fault_idx", "status"], "msg_id"
    )
    anomalies: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in got.get("fault_anomalies", []):
        if r["rk"] == rk:
            anomalies[r["fault_idx"]][r["status"]] = {
                "count": r["n"],
                "examples": examples.get((r["fault_idx"], r["status"]), []),
            }
    roles = sorted({(agent, role({"is_ack": is_ack, "sub": sub})) for agent, is_ack, sub in facts.roles(rk)})
    out = []
    for _, fi, start, wend in windows:
        f = inputs[rk].faults[fi]
        recovery: dict[str, dict[str, float | None]] = {}
        for agent, role_name in roles:
            t = rec.get((fi, agent, role_name))
            recovery.setdefault(agent, {})[role_name] = None if t is None else round(t - start, 6)
        acked, received = win[fi]["acked"], win[fi]["received"]
        found = anomalies[fi]
        out.append(
            {
                "fault_id": f.fault_id,
                "fault": f.fault,
                "target": f.target,
                "params": f.params,
                "start": start,
                "end": f.end,
                "open": f.end is None,
                "window": [start, wend],
                "anomalies": {s: found[s] for s in ANOMALY_STATUSES if s in found},
                "anomaly_count": sum(a["count"] for a in found.values()),
                "recovery_s": recovery,
                "acknowledged_in_window": acked,
                "received_in_window": received,
                "vacuous": acked == 0 or received == 0,
            }
        )
    return out
