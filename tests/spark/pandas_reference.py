"""A plain pandas implementation of the reconciliation semantics (docs/reconciliation.md).

Written independently of spark_analysis.reconcile (vectorised pandas, regex filter matching) to
cross-check the Spark job on generated histories, and as the benchmark baseline. It reads the same
staged Parquet (``analysis/events.parquet``) the job reads, so both see the same records.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

STATUSES = ("ok", "duplicated", "lost", "missed", "dropped_expected", "ghost", "in_doubt_missing")
EXTRA = ("extra", "misrouted")
ANOMALIES = tuple(s for s in STATUSES + EXTRA if s != "ok")
PUB = ("send_attempt", "sent", "dropped")
STATES = ("acknowledged", "dropped", "in_doubt", "unexpected")
GHOST_KINDS = ("", "timeout", "dropped_other", "in_doubt")


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


#: the staged columns the reconciliation reads (spark_analysis.ingest.STAGED_SCHEMA has more)
COLUMNS = (
    "event",
    "ts",
    "seq",
    "agent",
    "msg_id",
    "topic",
    "subscription",
    "qos",
    "durable",
    "reason",
    "handed_to_broker",
)
#: few distinct values: read dictionary-encoded, as pandas categoricals (a one-byte code per record)
CATEGORICAL = ("event", "agent", "topic", "subscription", "reason")
#: the Arrow types of the other columns (STAGED_SCHEMA's), for a run without staged files
_TYPES = {
    "ts": pa.float64(),
    "seq": pa.int64(),
    "msg_id": pa.string(),
    "qos": pa.int32(),
    "durable": pa.bool_(),
    "handed_to_broker": pa.bool_(),
}


def read_events(run_dir: Path) -> pd.DataFrame:
    """The staged records (one Parquet file per bucket), only the columns in ``COLUMNS``, the
    low-cardinality strings as categoricals.

    Arrow allocates the read through jemalloc where pyarrow has it: jemalloc hands the memory the
    read and the conversion free back to the system, while Arrow's default allocator (mimalloc)
    keeps it for Arrow alone, where pandas never reuses it (about 0.4 GB more peak RSS per million
    messages)."""
    path = run_dir / "analysis" / "events.parquet"
    previous = pa.default_memory_pool()
    with contextlib.suppress(NotImplementedError):  # a pyarrow without jemalloc: its default
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    try:
        tables = [
            pq.read_table(f, columns=list(COLUMNS), read_dictionary=list(CATEGORICAL))
            for f in sorted(path.glob("*.parquet"))
        ]
        if not tables:
            cat = pa.dictionary(pa.int32(), pa.string())
            tables = [pa.schema([(c, _TYPES.get(c, cat)) for c in COLUMNS]).empty_table()]
        table = pa.concat_tables(tables)
        del tables  # the conversion frees each Arrow column once converted (self_destruct)
        return table.to_pandas(split_blocks=True, self_destruct=True)
    finally:
        pa.set_memory_pool(previous)


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
    """Summary (the keys the tests compare) and the per-pair frame for one staged run.

    Memory (it must run at 10M messages): only the needed columns are read, low-cardinality
    strings are categoricals, ``msg_id`` is factorized once into ``mid`` (integer codes) and
    subscriptions are numbered (``sub_id``, their row in the small ``subs`` frame); the per-message
    work groups and joins on those integers, and ``pairs`` gets ``msg_id``, ``sub_agent`` and
    ``filter`` back as categoricals at the end. Staging guarantees every non-malformed message
    record has a ``msg_id`` (and ``agent``, ``ts``; a receipt a ``subscription``): no code is -1."""
    ev = read_events(run_dir)
    event = ev["event"]
    valid = event != "_malformed"
    malformed = int((~valid).sum())
    t_max = float(ev.loc[valid, "ts"].max()) if valid.any() else None
    ev["mid"], msg_ids = pd.factorize(ev.pop("msg_id"))
    sb = ev.loc[event == "subscribed", ["agent", "topic", "ts", "seq", "durable", "qos"]]
    is_pub = event.isin(PUB)
    pub = ev.loc[is_pub, ["mid", "event", "ts", "seq", "agent", "topic", "qos", "reason"]]
    pub["handed"] = ev.loc[is_pub, "handed_to_broker"].eq(True)
    rc = ev.loc[event == "received", ["mid", "agent", "subscription", "ts", "seq"]]
    del ev, event, valid, is_pub

    # messages, by mid: publisher records in time order, log order breaking ties (the stable sort
    # sort_values(["ts", "seq"]) makes, without factorizing the two columns first)
    pub = pub.iloc[np.lexsort((pub["seq"], pub["ts"]))]
    g = pub.groupby("mid", sort=False)
    msgs = pd.DataFrame(
        {
            "first_attempt_ts": g["ts"].min(),
            "first_attempt_seq": g["seq"].min(),
            "publisher": g["agent"].first(),
            "topic": g["topic"].first(),
            "qos": pub.loc[pub["event"] != "dropped", ["mid", "qos"]].groupby("mid")["qos"].max(),
            "acked": pub["event"].eq("sent").groupby(pub["mid"]).any(),
        }
    )
    drops = pub.loc[pub["event"] == "dropped", ["mid", "reason", "handed"]]
    msgs["drop_reason"] = drops.groupby("mid")["reason"].first()
    # a drop after the broker was handed the message (handed_to_broker true): fate unknown
    handed = drops.groupby("mid")["handed"].any()
    msgs["drop_handed"] = handed.reindex(msgs.index, fill_value=False).astype(bool)
    msgs["dropped"] = msgs.index.isin(drops["mid"])
    fate = np.where(msgs["acked"], 0, np.where(msgs["dropped"], 1, 2))
    msgs["state"] = pd.Categorical.from_codes(fate, categories=STATES)
    totals = {
        "attempted": len(msgs),
        "acknowledged": int((msgs["state"] == "acknowledged").sum()),
        "dropped": int((msgs["state"] == "dropped").sum()),
        "in_doubt": int((msgs["state"] == "in_doubt").sum()),
    }
    acks = pub.loc[pub["event"] == "sent", ["agent", "ts"]]  # for the faults
    del g, pub, drops, handed, fate

    # receipts, by (mid, agent, subscription)
    recv = (
        rc.groupby(["mid", "agent", "subscription"], sort=False, observed=True)
        .agg(received=("ts", "size"), first_receipt_ts=("ts", "min"), first_receipt_seq=("seq", "min"))
        .reset_index()
    )
    rc = rc[["agent", "subscription", "ts"]]  # for the faults

    # subscriptions: (agent, filter); first `subscribed` record gives time, durable, qos
    sb = sb.astype({"agent": object, "topic": object}).sort_values(["ts", "seq"])
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
    seen = recv[["agent", "subscription"]].drop_duplicates()
    subs = subs.merge(
        seen.astype(object).rename(columns={"agent": "sub_agent", "subscription": "filter"}),
        on=["sub_agent", "filter"],
        how="outer",
    )
    subs.index.name = "sub_id"
    sub_id = {(a, f): i for i, a, f in zip(subs.index, subs["sub_agent"], subs["filter"], strict=True)}
    seen["sub_id"] = np.array(
        [sub_id[a, f] for a, f in zip(seen["agent"], seen["subscription"], strict=True)], dtype=np.int64
    )
    recv = recv.merge(seen, on=["agent", "subscription"])
    del recv["agent"], recv["subscription"]

    # candidate pairs: filter matches the topic (per distinct topic x subscription)
    topics = msgs["topic"].dropna().unique()
    ts_rows = [
        (t, s.Index)
        for t in topics
        for s in subs.itertuples()
        if isinstance(s.filter, str) and topic_matches(s.filter, t)
    ]
    topic_sub = pd.DataFrame(ts_rows, columns=["topic", "sub_id"])
    topic_sub = topic_sub.astype({"topic": msgs["topic"].dtype, "sub_id": np.int64})
    cand = msgs[["topic", "first_attempt_ts"]].reset_index().merge(topic_sub, on="topic")
    sub_first_ts = cand["sub_id"].map(subs["sub_first_ts"])
    # expected, by pair: one integer per (message, subscription)
    n_subs = len(subs)
    expected = sub_first_ts.notna() & (sub_first_ts < cand["first_attempt_ts"])
    expected.index = cand["mid"].astype(np.int64) * n_subs + cand["sub_id"]
    del cand, sub_first_ts

    # pairs: those received, and the expected ones nobody received (a candidate neither expected
    # nor received has no status: no row)
    received_pair = recv["mid"].astype(np.int64) * n_subs + recv["sub_id"]
    recv["expected"] = received_pair.map(expected)  # NaN: the filter does not match the topic
    recv["matches"] = recv["expected"].notna()
    recv["expected"] = recv["expected"].eq(True)
    missing = expected.index[expected & ~expected.index.isin(received_pair)]
    missing = pd.DataFrame(
        {
            "mid": missing // n_subs,
            "sub_id": missing % n_subs,
            "expected": True,
            "matches": True,
            "received": 0,
        }
    )
    pairs = pd.concat([missing, recv], ignore_index=True)
    del expected, received_pair, missing, recv
    # the message's and the subscription's columns
    for col in msgs.columns:
        pairs[col] = pairs["mid"].map(msgs[col])
    for col in ("durable", "sub_qos"):
        pairs[col] = pairs["sub_id"].map(subs[col])
    del msgs
    pairs.insert(0, "msg_id", pd.Categorical.from_codes(pairs.pop("mid"), categories=msg_ids))
    for i, col in enumerate(("sub_agent", "filter"), start=1):
        pairs.insert(i, col, pairs["sub_id"].map(subs[col].astype("category")))
    del pairs["sub_id"]
    state = pairs["state"].fillna("unexpected")
    n = pairs["received"]
    exp = pairs["expected"]
    acked = state == "acknowledged"
    alo = (pairs["qos"].fillna(0) >= 1) & pairs["durable"].eq(True) & (pairs["sub_qos"].fillna(1) >= 1)
    conditions = [
        (state == "unexpected", "unexpected"),
        (exp & (n > 0) & ~acked, "ghost"),
        (exp & (n == 1), "ok"),
        (exp & (n > 1), "duplicated"),
        (exp & acked & alo, "lost"),
        (exp & acked, "missed"),
        (exp & (state == "dropped"), "dropped_expected"),
        (exp, "in_doubt_missing"),
        ((n > 0) & ~acked, "ghost"),
        ((n > 0) & pairs["matches"], "extra"),
        (n > 0, "misrouted"),
    ]
    names = ("unexpected", *STATUSES, *EXTRA)  # every status once
    status = np.select([c for c, _ in conditions], [names.index(s) for _, s in conditions])
    status = pd.Categorical.from_codes(status, categories=names)
    pairs["state"] = state
    pairs["status"] = status
    ghost_kind = np.where(
        status != "ghost",
        0,
        np.where(
            (state == "in_doubt") | ((state == "dropped") & pairs["drop_handed"].eq(True)),
            3,
            np.where(pairs["drop_reason"].isin(list(ghost_timeout_reasons)), 1, 2),
        ),
    )
    pairs["ghost_kind"] = pd.Categorical.from_codes(ghost_kind, categories=GHOST_KINDS)
    pairs["latency_s"] = pairs["first_receipt_ts"] - pairs["first_attempt_ts"]
    del conditions, exp, acked, alo, ghost_kind

    deliveries = {"expected": int(pairs["expected"].sum())}
    counts = pairs["status"].value_counts()
    for s in STATUSES + EXTRA:
        deliveries[s] = int(counts.get(s, 0))
    gk = pairs.loc[pairs["status"] == "ghost", "ghost_kind"].value_counts()
    ghosts = {k: int(gk.get(k, 0)) for k in ("timeout", "dropped_other", "in_doubt")}
    unexpected = int(pairs.loc[state == "unexpected", "msg_id"].nunique())

    delivered = (state != "unexpected") & (n > 0)
    del state, n
    lat = pairs.loc[delivered, "latency_s"].to_numpy(dtype=float)
    latency: dict[str, float | None] = {"p50": None, "p95": None, "p99": None, "max": None, "count": len(lat)}
    if len(lat):
        latency.update(
            p50=_nearest_rank(lat, 0.5),
            p95=_nearest_rank(lat, 0.95),
            p99=_nearest_rank(lat, 0.99),
            max=float(lat.max()),
        )
    del lat
    rec = pairs.loc[delivered, ["sub_agent", "filter", "publisher", "first_receipt_seq", "first_attempt_seq"]]
    rec = rec.sort_values("first_receipt_seq", kind="stable")
    ooo: dict[tuple[str, str, str], int] = {}
    for key, grp in rec.groupby(["sub_agent", "filter", "publisher"], observed=True):
        s = grp["first_attempt_seq"].to_numpy()
        prev_max = np.maximum.accumulate(s)
        ooo[key] = int((s[1:] < prev_max[:-1]).sum())
    ooo = dict(sorted(ooo.items()))  # streams in name order (categoricals group in category order)
    del rec, delivered

    # faults
    faults = []
    for f in read_faults(run_dir):
        start = float(f["start"])
        end = f["end"] if f["end"] is not None else max(t_max if t_max is not None else start, start)
        wend = max(end, start) + settle_s
        in_win = pairs.loc[
            pairs["status"].isin(ANOMALIES) & pairs["first_attempt_ts"].between(start, wend), "status"
        ]
        anomalies = {k: int(v) for k, v in in_win.value_counts().items() if v}
        acked_in = int(acks["ts"].between(start, wend).sum())
        recv_in = int(rc["ts"].between(start, wend).sum())
        recovery: dict[str, dict[str, float | None]] = {}
        for agent, first_ts in _first_at_or_after(acks, ["agent"], start).items():
            recovery.setdefault(agent, {})["publisher"] = _since(first_ts, start)
        for (agent, sub), first_ts in _first_at_or_after(rc, ["agent", "subscription"], start).items():
            recovery.setdefault(agent, {})[f"subscriber:{sub}"] = _since(first_ts, start)
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
        "pairs": pairs,
    }


def _first_at_or_after(records: pd.DataFrame, keys: list[str], start: float) -> pd.Series:
    """Per group of ``records``: its first ``ts`` at or after ``start`` (NaN: none)."""
    after = records["ts"].where(records["ts"] >= start)
    return after.groupby([records[k] for k in keys], observed=True).min()


def _since(ts: float, start: float) -> float | None:
    return None if pd.isna(ts) else float(ts - start)
