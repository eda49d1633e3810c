"""The pairs stage for runs with few subscriptions: one wide row per message (three columns per
subscription index), then one struct per subscription.

For one run the staged buckets hold every record of a message in one file sorted by ``msg_id``,
so this is a streaming sort aggregation with no shuffle: the plan of the benchmark's and the
scenario runs' measurements (docs/reconciliation.md). Its cost grows with messages x
subscriptions, so a fleet (hundreds of subscriptions, issue 44) takes spark_analysis.pairs'
plan from rows of matches and receipts instead; the job picks by the runs' subscriptions
(``wide_enough``). Both give the same rows (tests/spark/test_fleet_pairs.py)."""

from __future__ import annotations

import os
from typing import Any

from spark_analysis.facts import Facts
from spark_analysis.pairs import (
    _TIMES,
    _classified,
    _stream,
    per_message_rows,
    publisher_aggs,
    state_code,
    with_matches,
)
from spark_analysis.policy import Policy

#: the most subscriptions of a run for the wide plan (``BFH_WIDE_PAIRS_MAX_SUBS``)
WIDE_MAX_SUBS = 16


def wide_enough(facts: Facts) -> bool:
    """Whether the runs have few enough subscriptions for the wide plan."""
    return facts.smax <= int(os.environ.get("BFH_WIDE_PAIRS_MAX_SUBS") or WIDE_MAX_SUBS)


def classify_wide(spark: Any, ev: Any, facts: Facts, policy: Policy) -> Any:
    """spark_analysis.pairs.classify with one wide row per message: same rows, same codes."""
    msg = _per_message(spark, _stream(spark, ev, facts), facts)
    pairs, msg_cols = _pairs(msg, facts)
    return _classified(pairs, msg_cols, facts, policy)


def _per_message(spark: Any, rows: Any, facts: Facts) -> Any:
    """One row per message: its publisher records, its receipts per subscription index
    (n/f/s<J>), its state, and which subscriptions' filters match its topic (m<J>)."""
    from pyspark.sql import functions as F

    col, S = F.col, facts.smax
    aggs = publisher_aggs()
    for J in range(S):
        hit = col("j") == J
        aggs += [
            F.count(F.when(hit, 1)).alias(f"n{J}"),
            F.min(F.when(hit, col("ts"))).alias(f"f{J}"),
            F.min(F.when(hit, col("seq"))).alias(f"s{J}"),
        ]
    msg = per_message_rows(rows, facts, aggs)
    attempted = col("pub_records") > 0
    msg = msg.withColumn(
        "state",
        F.when(~attempted, state_code("unexpected"))
        .when(col("ack_ts").isNotNull(), state_code("acknowledged"))
        .when(col("drop_ts").isNotNull(), state_code("dropped"))
        .otherwise(state_code("in_doubt")),
    )
    msg = msg.withColumn(
        "reached", F.greatest(*[col(f"n{J}") > 0 for J in range(S)], F.lit(False)) if S else F.lit(False)
    )
    # which subscriptions' filters match the topic, one boolean per run-local subscription index
    msg, matched = with_matches(spark, msg, facts), col("matched_js")
    m = [F.coalesce(F.array_contains(matched, J), F.lit(False)).alias(f"m{J}") for J in range(S)]
    return msg.select("*", *m)


def _pairs(msg: Any, facts: Facts) -> tuple[Any, list[str]]:
    """The (message, subscription) rows of the messages, and the message columns they carry."""
    from pyspark.sql import functions as F

    col, S = F.col, facts.smax
    # one row per (message, subscription) pair that is expected, matched or received; one row
    # without subscription for a message that has none of them
    matches = [F.coalesce(col(f"m{J}"), F.lit(False)) for J in range(S)]
    keeps = [m | (col(f"n{J}") > 0) for J, m in enumerate(matches)]
    # the message's row is its first kept pair: the least kept index (linear in S, where
    # "kept and none before" is quadratic, and a fleet has hundreds of subscriptions)
    no_index = F.lit(None).cast("int")
    first_kept = F.least(*[F.when(k, F.lit(J)) for J, k in enumerate(keeps)], no_index) if S else no_index
    msg = msg.withColumn("_first_kept", first_kept)  # once per message, not once per pair
    first_kept = col("_first_kept")
    structs = []
    for J, (m, keep) in enumerate(zip(matches, keeps, strict=True)):
        sub_first = facts.sub_field("first_ts", J, "double")
        expected = F.coalesce(m & (sub_first < col("first_attempt_ts")), F.lit(False))
        first = F.coalesce(first_kept == J, F.lit(False))
        structs.append(
            F.struct(
                F.lit(J).cast("int").alias("j"),
                keep.alias("keep"),
                first.alias("msg_row"),
                col(f"n{J}").cast("int").alias("received"),
                col(f"f{J}").alias("first_receipt_ts"),
                col(f"s{J}").alias("first_receipt_seq"),
                m.alias("matches"),
                expected.alias("expected"),
            )
        )
    none_keep = first_kept.isNull()
    structs.append(
        F.struct(
            F.lit(None).cast("int").alias("j"),
            none_keep.alias("keep"),
            none_keep.alias("msg_row"),
            F.lit(0).alias("received"),
            F.lit(None).cast("double").alias("first_receipt_ts"),
            F.lit(None).cast("long").alias("first_receipt_seq"),
            F.lit(False).alias("matches"),
            F.lit(False).alias("expected"),
        )
    )
    msg_cols = ["rk", "msg_id", "publisher_h", "topic_h", "qos", "state", *_TIMES, "reason_h"]
    pairs = msg.select(*msg_cols, "drop_handed", "reached", F.inline(F.array(*structs))).where(col("keep"))
    return pairs, msg_cols
