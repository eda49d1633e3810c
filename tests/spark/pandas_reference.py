"""A plain pandas implementation of the reconciliation semantics (docs/reconciliation.md).

Written independently of spark_analysis.reconcile (vectorised pandas, regex filter matching) to
cross-check the Spark job on generated histories, and as the benchmark baseline. It reads the same
staged Parquet (``analysis/events.parquet``) the job reads, so both see the same records.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

STATUSES = ("ok", "duplicated", "lost", "missed", "dropped_expected", "ghost", "in_doubt_missing")
EXTRA = ("extra", "misrouted")
ANOMALIES = tuple(s for s in STATUSES + EXTRA if s != "ok")
PUB = ("send_attempt", "sent", "dropped")


def _filter_regex(topic_filter: str) -> str:
    levels = topic_filter.split("/")
    multi = levels[-1] == "#"
    if multi:
        levels = levels[:-1]
        if not levels:
            return "(?s).*"
    body = "/".join("[^/]*" if lv == "+" else re.escape(lv) for lv in levels)
    return "(?s)" + body + ("(/.*)?" if multi else "")


def topic_matches(topic_filter: str, topic: str) -> bool:
    if topic.startswith("$") and topic_filter[:1] in ("+", "#"):
        return False
    return re.fullmatch(_filter_regex(topic_filter), topic) is not None


def _nearest_rank(values: np.ndarray, q: float) -> float:
    s = np.sort(values)
    return float(s[max(1, math.ceil(q * len(s))) - 1])


def read_events(run_dir: Path) -> pd.DataFrame:
    path = run_dir / "analysis" / "events.parquet"
    frames = [pd.read_parquet(f) for f in sorted(path.glob("*.parquet"))]
    if not frames:
        from spark_analysis.ingest import STAGED_SCHEMA

        return pd.DataFrame({f.name: pd.Series(dtype=object) for f in STAGED_SCHEMA.fields})
    return pd.concat(frames, ignore_index=True)


def read_faults(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "faults.jsonl"
    faults: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if not isinstance(rec, dict) or "fault_id" not in rec or not isinstance(rec.get("ts"), int | float):
            continue
        f = faults.setdefault(
            str(rec["fault_id"]), {"fault_id": str(rec["fault_id"]), "start": None, "end": None}
        )
        if rec.get("event") == "fault_start":
            f["start"] = rec["ts"] if f["start"] is None else min(f["start"], rec["ts"])
        elif rec.get("event") == "fault_end":
            f["end"] = rec["ts"] if f["end"] is None else max(f["end"], rec["ts"])
    out = [f for f in faults.values() if f["start"] is not None]
    return sorted(out, key=lambda f: (f["start"], f["fault_id"]))


def reconcile_pandas(
    run_dir: Path, *, settle_s: float = 10.0, ghost_timeout_reasons=("publisher_timeout",)
) -> dict:
    """Summary (the keys the tests compare) and the per-pair frame for one staged run."""
    ev = read_events(run_dir)
    malformed = int((ev["event"] == "_malformed").sum())
    ev = ev[ev["event"] != "_malformed"]

    # subscriptions: (agent, filter); first `subscribed` record gives time, durable, qos
    sb = ev[ev["event"] == "subscribed"].sort_values(["ts", "seq"])
    first = sb.groupby(["agent", "topic"], sort=True).first().reset_index()
    subs = pd.DataFrame(
        {
            "sub_agent": first["agent"],
            "filter": first["topic"],
            "sub_first_ts": first["ts"],
            "durable": first["durable"],
            "sub_qos": first["qos"],
        }
    )
    rc = ev[ev["event"] == "received"]
    seen = (
        rc[["agent", "subscription"]]
        .drop_duplicates()
        .rename(columns={"agent": "sub_agent", "subscription": "filter"})
    )
    subs = subs.merge(seen, on=["sub_agent", "filter"], how="outer")

    # messages
    pub = ev[ev["event"].isin(PUB)].sort_values(["ts", "seq"])
    g = pub.groupby("msg_id", sort=False)
    msgs = pd.DataFrame(
        {
            "first_attempt_ts": g["ts"].min(),
            "first_attempt_seq": g["seq"].min(),
            "publisher": g["agent"].first(),
            "topic": g["topic"].first(),
            "qos": pub[pub["event"] != "dropped"].groupby("msg_id")["qos"].max(),
            "acked": pub.assign(x=pub["event"] == "sent").groupby("msg_id")["x"].any(),
        }
    )
    drops = pub[pub["event"] == "dropped"]
    dropped = drops.groupby("msg_id")["reason"].first()
    msgs["drop_reason"] = dropped
    # a drop after the broker was handed the message (handed_to_broker true): fate unknown
    handed = drops.assign(h=drops["handed_to_broker"].eq(True)).groupby("msg_id")["h"].any()
    msgs["drop_handed"] = handed.reindex(msgs.index, fill_value=False).astype(bool)
    msgs["dropped"] = msgs.index.isin(dropped.index)
    msgs["state"] = np.where(msgs["acked"], "acknowledged", np.where(msgs["dropped"], "dropped", "in_doubt"))
    msgs = msgs.reset_index()

    # candidate pairs: filter matches the topic (per distinct topic x subscription)
    topics = msgs["topic"].dropna().unique()
    ts_rows = [
        (t, s.sub_agent, s.filter)
        for t in topics
        for s in subs.itertuples()
        if isinstance(s.filter, str) and topic_matches(s.filter, t)
    ]
    topic_sub = pd.DataFrame(ts_rows, columns=["topic", "sub_agent", "filter"])
    cand = (
        msgs[["msg_id", "topic", "first_attempt_ts"]]
        .merge(topic_sub, on="topic")
        .merge(subs, on=["sub_agent", "filter"])
    )
    cand["expected"] = cand["sub_first_ts"].notna() & (cand["sub_first_ts"] < cand["first_attempt_ts"])
    cand["matches"] = True
    cand = cand[["msg_id", "sub_agent", "filter", "expected", "matches"]]

    rcg = rc.sort_values(["seq"]).groupby(["msg_id", "agent", "subscription"], sort=False)
    recv = pd.DataFrame(
        {"received": rcg.size(), "first_receipt_ts": rcg["ts"].min(), "first_receipt_seq": rcg["seq"].min()}
    ).reset_index()
    recv = recv.rename(columns={"agent": "sub_agent", "subscription": "filter"})

    pairs = cand.merge(recv, on=["msg_id", "sub_agent", "filter"], how="outer")
    pairs["expected"] = pairs["expected"].eq(True)
    pairs["matches"] = pairs["matches"].eq(True)
    pairs["received"] = pairs["received"].fillna(0).astype(int)
    pairs = pairs.merge(msgs, on="msg_id", how="left").merge(
        subs[["sub_agent", "filter", "durable", "sub_qos"]], on=["sub_agent", "filter"], how="left"
    )
    state = pairs["state"].fillna("unexpected")
    n = pairs["received"]
    exp = pairs["expected"]
    acked = state == "acknowledged"
    alo = (pairs["qos"].fillna(0) >= 1) & pairs["durable"].eq(True) & (pairs["sub_qos"].fillna(1) >= 1)
    status = np.select(
        [
            state == "unexpected",
            exp & (n > 0) & ~acked,
            exp & (n == 1),
            exp & (n > 1),
            exp & acked & alo,
            exp & acked,
            exp & (state == "dropped"),
            exp,
            (n > 0) & ~acked,
            (n > 0) & pairs["matches"],
            n > 0,
        ],
        [
            "unexpected",
            "ghost",
            "ok",
            "duplicated",
            "lost",
            "missed",
            "dropped_expected",
            "in_doubt_missing",
            "ghost",
            "extra",
            "misrouted",
        ],
        default="",
    )
    pairs["state"] = state
    pairs["status"] = status
    pairs["ghost_kind"] = np.where(
        status != "ghost",
        "",
        np.where(
            (state == "in_doubt") | ((state == "dropped") & pairs["drop_handed"].eq(True)),
            "in_doubt",
            np.where(pairs["drop_reason"].isin(list(ghost_timeout_reasons)), "timeout", "dropped_other"),
        ),
    )
    pairs["latency_s"] = pairs["first_receipt_ts"] - pairs["first_attempt_ts"]
    kept = pairs[pairs["status"] != ""]

    deliveries = {"expected": int(pairs["expected"].sum())}
    counts = kept["status"].value_counts()
    for s in STATUSES + EXTRA:
        deliveries[s] = int(counts.get(s, 0))
    gk = kept.loc[kept["status"] == "ghost", "ghost_kind"].value_counts()
    ghosts = {k: int(gk.get(k, 0)) for k in ("timeout", "dropped_other", "in_doubt")}
    unexpected = int(pairs.loc[state == "unexpected", "msg_id"].nunique())

    rec = pairs[(state != "unexpected") & (n > 0)]
    lat = rec["latency_s"].to_numpy(dtype=float)
    latency = {"p50": None, "p95": None, "p99": None, "max": None, "count": int(len(lat))}
    if len(lat):
        latency.update(
            p50=_nearest_rank(lat, 0.5),
            p95=_nearest_rank(lat, 0.95),
            p99=_nearest_rank(lat, 0.99),
            max=float(lat.max()),
        )
    ooo: dict[tuple[str, str, str], int] = {}
    for key, grp in rec.sort_values("first_receipt_seq").groupby(
        ["sub_agent", "filter", "publisher"], sort=True
    ):
        s = grp["first_attempt_seq"].to_numpy()
        prev_max = np.maximum.accumulate(s)
        ooo[key] = int((s[1:] < prev_max[:-1]).sum())

    totals = {
        "attempted": len(msgs),
        "acknowledged": int((msgs["state"] == "acknowledged").sum()),
        "dropped": int((msgs["state"] == "dropped").sum()),
        "in_doubt": int((msgs["state"] == "in_doubt").sum()),
    }

    # faults
    t_max = float(ev["ts"].max()) if len(ev) else None
    succ_ack = ev[ev["event"] == "sent"]
    faults = []
    for f in read_faults(run_dir):
        start = float(f["start"])
        end = f["end"] if f["end"] is not None else max(t_max if t_max is not None else start, start)
        wend = max(end, start) + settle_s
        in_win = kept[
            kept["status"].isin(ANOMALIES)
            & (kept["first_attempt_ts"] >= start)
            & (kept["first_attempt_ts"] <= wend)
        ]
        anomalies = {k: int(v) for k, v in in_win["status"].value_counts().items()}
        acked_in = int(((succ_ack["ts"] >= start) & (succ_ack["ts"] <= wend)).sum())
        recv_in = int(((rc["ts"] >= start) & (rc["ts"] <= wend)).sum())
        recovery: dict[str, dict[str, float | None]] = {}
        for agent, grp in succ_ack.groupby("agent"):
            after = grp.loc[grp["ts"] >= start, "ts"]
            recovery.setdefault(agent, {})["publisher"] = float(after.min() - start) if len(after) else None
        for (agent, sub), grp in rc.groupby(["agent", "subscription"]):
            after = grp.loc[grp["ts"] >= start, "ts"]
            recovery.setdefault(agent, {})[f"subscriber:{sub}"] = (
                float(after.min() - start) if len(after) else None
            )
        faults.append(
            {
                "fault_id": f["fault_id"],
                "window": [start, wend],
                "anomalies": anomalies,
                "acknowledged_in_window": acked_in,
                "received_in_window": recv_in,
                "vacuous": acked_in == 0 or recv_in == 0,
                "recovery_s": recovery,
            }
        )
    return {
        "totals": totals,
        "deliveries": deliveries,
        "ghosts": ghosts,
        "unexpected": unexpected,
        "latency_s": latency,
        "out_of_order": ooo,
        "faults": faults,
        "malformed": malformed,
        "pairs": kept,
    }
