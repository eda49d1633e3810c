"""Stage 2: one row per (message, subscription) pair, classified -> ``messages.parquet``.

Publisher records are aggregated per message (the staged buckets come sorted by ``msg_id``),
receipts per (message, subscription), each subscription's filter is matched against the topics,
and every pair that is expected, matched or received gets its status (docs/reconciliation.md).
The pairs are built from rows of matches and receipts: the cost grows with the deliveries, not
with messages x subscriptions (a fleet's fan-out, issue 44).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spark_analysis.facts import Facts
from spark_analysis.frames import json_literal, values
from spark_analysis.ingest import MESSAGE_EVENTS
from spark_analysis.policy import Policy
from spark_analysis.statuses import GHOST_KINDS, GUARANTEES, PAIR_STATUSES, STATES

#: unique-per-row columns: dictionary encoding only costs CPU before Parquet falls back
_NO_DICTIONARY = (
    "msg_id", "first_attempt_ts", "first_attempt_seq", "ack_ts", "drop_ts", "first_receipt_ts",
    "first_receipt_seq", "latency_s",
)  # fmt: skip


#: a message's attempts and times, copied onto each of its pairs
_TIMES = ("attempts", "attempt_records", "first_attempt_ts", "first_attempt_seq", "ack_ts", "drop_ts")
#: the message columns every pair carries
MSG_COLS = ["rk", "msg_id", "publisher_h", "topic_h", "qos", "state", *_TIMES, "reason_h"]


def _writer(w: Any) -> Any:
    w = w.mode("overwrite")
    for c in _NO_DICTIONARY:
        w = w.option(f"parquet.enable.dictionary#{c}", "false")
    return w


def classify(spark: Any, ev: Any, facts: Facts, policy: Policy) -> Any:
    """Every (message, subscription) pair of the staged events ``ev``, classified, with codes
    for its names (see named())."""
    rows = _stream(spark, ev, facts)
    msg = with_matches(spark, _per_message(rows, facts), facts)
    return _classified(_pairs(msg, rows, facts), MSG_COLS, facts, policy)


def _stream(spark: Any, ev: Any, facts: Facts) -> Any:
    """The message events as one coded stream, each receipt with its run-local subscription
    index ``j``."""
    from pyspark.sql import functions as F

    col = F.col

    def h(name: str) -> Any:
        return F.when(col(name).isNotNull(), F.xxhash64(name))

    # publisher records (kind 0 attempt, 1 sent, 2 dropped) and receipts (kind 3, with the
    # run-local subscription index j) in one stream; the staged events come bucketed by msg_id,
    # so a single run aggregates per message without a shuffle (several runs: Spark shuffles)
    kind = (
        F.when(col("event") == "send_attempt", 0)
        .when(col("event") == "sent", 1)
        .when(col("event") == "dropped", 2)
        .when(col("event") == "received", 3)
        .cast("byte")
    )
    # a hash join (a literal map would be scanned key by key for every receipt)
    subs_df = values(
        spark,
        [(s["rk"], s["agent"], s["filter"], s["j"]) for s in facts.subs],
        "rk int, agent string, subscription string, j int",
    )
    pub = kind < 3
    return (
        ev.where(col("event").isin(*MESSAGE_EVENTS))
        .join(F.broadcast(subs_df), ["rk", "agent", "subscription"], "left")
        .select(
            "rk",
            "msg_id",
            kind.alias("kind"),
            "ts",
            "seq",
            F.when(pub, h("agent")).alias("agent_h"),
            F.when(pub, h("topic")).alias("topic_h"),
            F.when(pub, col("qos")).alias("qos"),
            F.when(pub, F.greatest("attempt", "attempts")).alias("att"),
            F.when(pub, h("reason")).alias("reason_h"),
            F.when(kind == 2, col("handed_to_broker")).alias("handed"),
            F.when(kind == 3, col("j")).alias("j"),
        )
    )


def publisher_aggs() -> list[Any]:
    """A message's publisher-side aggregates, the same in both plans (this one and widepairs').
    The first publisher record is the first send_attempt whenever there is one (sent and dropped
    follow their attempts in the publisher's own log)."""
    from pyspark.sql import functions as F

    col = F.col
    k = col("kind")
    is_pub = k < 3
    return [
        F.count(F.when(is_pub, 1)).alias("pub_records"),
        F.min(F.when(is_pub, col("ts"))).alias("first_attempt_ts"),
        F.min(F.when(is_pub, col("seq"))).alias("first_attempt_seq"),
        F.min("agent_h").alias("publisher_h"),
        F.min("topic_h").alias("topic_h"),
        F.max(F.when(k <= 1, col("qos"))).alias("qos"),
        F.count(F.when(k == 0, 1)).alias("attempt_records"),
        F.max("att").alias("attempts"),
        F.min(F.when(k == 1, col("ts"))).alias("ack_ts"),
        F.min(F.when(k == 2, col("ts"))).alias("drop_ts"),
        F.min("reason_h").alias("reason_h"),
        F.max("handed").alias("drop_handed"),
    ]


def per_message_rows(rows: Any, facts: Facts, aggs: list[Any]) -> Any:
    """`aggs` over each message's rows (both plans), with its run key `rk`."""
    from pyspark.sql import functions as F

    if facts.runs == 1:
        # grouped by msg_id alone, the order of the sorted buckets satisfies the aggregation
        # (a constant rk in the key would not): a streaming sort aggregation, no hash map
        return rows.groupBy("msg_id").agg(*aggs).withColumn("rk", F.lit(0))
    return rows.groupBy("rk", "msg_id").agg(*aggs)


def _per_message(rows: Any, facts: Facts) -> Any:
    """One row per message: its publisher records, its state, its receipts' count and the least
    subscription index it was received on (the subscriptions come as rows: see _pairs)."""
    from pyspark.sql import functions as F

    col = F.col
    k = col("kind")
    got = (k == 3) & col("j").isNotNull()
    aggs = [
        *publisher_aggs(),
        (F.count(F.when(got, 1)) > 0).alias("reached"),
        F.min(F.when(got, col("j"))).alias("first_received_j"),
    ]
    msg = per_message_rows(rows, facts, aggs)
    attempted = col("pub_records") > 0
    return msg.withColumn(
        "state",
        F.when(~attempted, state_code("unexpected"))
        .when(col("ack_ts").isNotNull(), state_code("acknowledged"))
        .when(col("drop_ts").isNotNull(), state_code("dropped"))
        .otherwise(state_code("in_doubt")),
    )


def with_matches(spark: Any, msg: Any, facts: Facts) -> Any:
    """``msg`` with ``matched_js``: the run-local indexes of the subscriptions whose filter matches
    the message's topic (``topic_h``), ascending. Matched on the driver (distinct topics x
    distinct filters), joined as one literal table: one broadcast."""
    from pyspark.sql import functions as F

    from spark_analysis.mqtt import matches

    filters: dict[tuple[int, str], list[int]] = {}
    for sub in facts.subs:
        filters.setdefault((sub["rk"], sub["filter"]), []).append(sub["j"])
    rows = [
        (rk, topic, sorted(j for (r, f), js in filters.items() if r == rk and matches(f, topic) for j in js))
        for rk, topic in facts.topics
    ]
    table = values(spark, rows, "rk int, topic string, matched_js array<int>")
    table = table.select("rk", F.xxhash64("topic").alias("topic_h"), "matched_js")
    return msg.join(F.broadcast(table), ["rk", "topic_h"], "left")


def _pairs(msg: Any, rows: Any, facts: Facts) -> Any:
    """The (message, subscription) rows: every pair whose filter matches the message's topic or
    which received it, one row without subscription for a message with neither. Built from rows
    of matches and of receipts, so the cost grows with the deliveries, not with messages x
    subscriptions (a fleet's fan-out: issue 44)."""
    from pyspark.sql import functions as F

    col = F.col
    matched_js = col("matched_js")
    # the message's row is its first kept pair: the least index matched or received
    msg = msg.withColumn("_first_kept", F.least(F.array_min(matched_js), "first_received_j"))
    no_ts, no_seq = F.lit(None).cast("double"), F.lit(None).cast("long")
    matched = msg.select(
        "rk", "msg_id", F.explode(matched_js).alias("j"), F.lit(True).alias("m"), F.lit(0).alias("r"),
        no_ts.alias("ts"), no_seq.alias("seq"),
    )  # fmt: skip
    received = rows.where((col("kind") == 3) & col("j").isNotNull()).select(
        "rk", "msg_id", "j", F.lit(False).alias("m"), F.lit(1).alias("r"), "ts", "seq"
    )
    # partitioned by message, so the join with the messages below needs no second shuffle of them
    kept = (
        matched.unionByName(received)
        .repartition("rk", "msg_id")
        .groupBy("rk", "msg_id", "j")
        .agg(
            F.max("m").alias("m"),
            F.sum("r").cast("int").alias("n"),
            F.min("ts").alias("f"),
            F.min("seq").alias("s"),
        )
    )
    j, m = col("j"), F.coalesce(col("m"), F.lit(False))
    sub_first = facts.sub_lookup("first_ts", j, "double")
    return msg.join(kept, ["rk", "msg_id"], "left").select(
        *MSG_COLS,
        "drop_handed",
        "reached",
        j,
        F.coalesce(col("n"), F.lit(0)).alias("received"),
        col("f").alias("first_receipt_ts"),
        col("s").alias("first_receipt_seq"),
        m.alias("matches"),
        F.coalesce(m & (sub_first < col("first_attempt_ts")), F.lit(False)).alias("expected"),
        F.coalesce(j == col("_first_kept"), j.isNull()).alias("msg_row"),
    )


def _classified(pairs: Any, msg_cols: list[str], facts: Facts, pol: Policy) -> Any:
    """Each pair's guarantee, status and ghost kind (docs/reconciliation.md)."""
    from pyspark.sql import functions as F

    col = F.col
    j = col("j")
    durable = facts.sub_lookup("durable", j, "boolean")
    sub_qos = facts.sub_lookup("qos", j, "int")
    n = col("received")
    st = col("state")
    attempted = st != state_code("unexpected")
    expected = col("expected")
    acked = st == state_code("acknowledged")
    alo = (
        (F.coalesce(col("qos"), F.lit(0)) >= 1)
        & F.coalesce(durable, F.lit(False))
        & (F.coalesce(sub_qos, F.lit(1)) >= 1)
    )
    status = (
        F.when(j.isNull(), F.lit(None).cast("byte"))
        .when(~attempted, status_code("unexpected"))
        .when(expected & (n > 0) & ~acked, status_code("ghost"))
        .when(expected & (n == 1), status_code("ok"))
        .when(expected & (n > 1), status_code("duplicated"))
        .when(expected & acked & alo, status_code("lost"))
        .when(expected & acked, status_code("missed"))
        .when(expected & (st == state_code("dropped")), status_code("dropped_expected"))
        .when(expected, status_code("in_doubt_missing"))
        .when((n > 0) & ~acked, status_code("ghost"))
        .when((n > 0) & col("matches"), status_code("extra"))
        .when(n > 0, status_code("misrouted"))
    )
    # dropped after a broker was handed the message: its fate was unknown at the drop
    handed_drop = (st == state_code("dropped")) & F.coalesce(col("drop_handed"), F.lit(False))
    timeout_h = [F.xxhash64(F.lit(r)) for r in pol.ghost_timeout_reasons]
    ghost_kind = (
        F.when(st == state_code("in_doubt"), ghost_code("in_doubt"))
        .when(handed_drop, ghost_code("in_doubt"))
        .when(col("reason_h").isin(*timeout_h) if timeout_h else F.lit(False), ghost_code("timeout"))
        .otherwise(ghost_code("dropped_other"))
    )
    has_sub = j.isNotNull()
    return pairs.select(
        *msg_cols,
        j.alias("sub_index"),
        F.when(has_sub, expected).alias("expected"),
        F.when(
            has_sub & attempted,
            F.when(alo, guarantee_code("at-least-once")).otherwise(guarantee_code("best-effort")),
        ).alias("guarantee"),
        n.alias("received"),
        "reached",
        "first_receipt_ts",
        "first_receipt_seq",
        (col("first_receipt_ts") - col("first_attempt_ts")).alias("latency_s"),
        status.alias("status"),
        F.when(status == status_code("ghost"), ghost_kind).alias("ghost_kind"),
        "msg_row",
    )


def write_pairs(spark: Any, ev: Any, facts: Facts, policy: Policy, path: Path, classifier: Any = None) -> Any:
    """Classify every pair of the staged events ``ev``, write them under ``path`` (coded, partitioned
    by run key) and return them as a DataFrame read back from there. ``classifier``: another
    classify() with the same result (the tests' reference)."""
    coded = (classifier or classify)(spark, ev, facts, policy)
    write_by_run(coded, facts.runs, path)
    return spark.read.schema(coded.schema).parquet(str(path))


def listed(coded: Any) -> Any:
    """The pairs ``messages.parquet`` holds by default: every pair whose status is not ``ok``, and
    the first row of every message that was not acknowledged (dropped, in doubt, unexpected)."""
    from pyspark.sql import functions as F

    col = F.col
    return coded.where(
        (col("status").isNotNull() & (col("status") != status_code("ok")))
        | (col("msg_row") & (col("state") != state_code("acknowledged")))
    )


def named(spark: Any, coded: Any, facts: Facts, hashes: bool = False) -> Any:
    """The pairs ``coded`` with every code replaced by its name: the columns of ``messages.parquet``
    (docs/reconciliation.md). With ``hashes``, publisher, topic and drop reason stay hashes
    (``publisher_h``, ``topic_h``, ``reason_h``: no joins, for the aggregates)."""
    from pyspark.sql import functions as F

    col = F.col
    df = coded
    names = ["publisher_h", "topic_h"] if hashes else ["publisher", "topic"]
    if not hashes:
        dim = _dims(spark, facts)
        for kind, hcol, out in (("agent", "publisher_h", "publisher"), ("topic", "topic_h", "topic"),
                                ("reason", "reason_h", "drop_reason")):  # fmt: skip
            df = _decode(dim, df, kind, hcol, out)
    j = col("sub_index")
    return df.select(
        "rk",
        F.element_at(json_literal(facts.run_ids, "array<string>"), col("rk") + 1).alias("run"),
        "msg_id",
        *names,
        "qos",
        _name(STATES, "state"),
        *_TIMES,
        "reason_h" if hashes else "drop_reason",
        "sub_index",
        facts.sub_lookup("agent", j, "string").alias("subscriber"),
        facts.sub_lookup("filter", j, "string").alias("subscription"),
        facts.sub_lookup("durable", j, "boolean").alias("durable"),
        facts.sub_lookup("qos", j, "int").alias("sub_qos"),
        "expected",
        _name(GUARANTEES, "guarantee"),
        "received",
        "reached",
        "first_receipt_ts",
        "first_receipt_seq",
        "latency_s",
        _name(PAIR_STATUSES, "status"),
        _name(GHOST_KINDS, "ghost_kind"),
        "msg_row",
    )


def write_by_run(pairs: Any, runs: int, path: Path, *, every_run: bool = False) -> None:
    """Write ``pairs`` under ``path``, one folder per run key (``rk=N``). With ``every_run``, each
    run's folder is written on its own, so one without rows still gets a file with the schema."""
    if runs == 1:  # no partitioning, hence no sort before the write
        _writer(pairs.drop("rk").write).parquet(str(path / "rk=0"))
    elif every_run:
        from pyspark.sql import functions as F

        for rk in range(runs):
            _writer(pairs.where(F.col("rk") == rk).drop("rk").write).parquet(str(path / f"rk={rk}"))
    else:
        _writer(pairs.write.partitionBy("rk")).parquet(str(path))


# -- codes: the internal table carries small integers and hashes, not strings (cheaper to write)
def _coder(names: tuple[str, ...]) -> Any:
    def lit(name: str) -> Any:
        from pyspark.sql import functions as F

        return F.lit(names.index(name)).cast("byte")

    return lit


status_code, state_code, ghost_code, guarantee_code = (
    _coder(n) for n in (PAIR_STATUSES, STATES, GHOST_KINDS, GUARANTEES)
)


def _name(names: tuple[str, ...], column: str) -> Any:
    from pyspark.sql import functions as F

    code = F.col(column).cast("int") + 1
    return F.element_at(json_literal(list(names), "array<string>"), code).alias(column)


def _dims(spark: Any, facts: Facts) -> Any:
    from pyspark.sql import functions as F

    return values(spark, facts.dims, "rk int, kind string, value string").withColumn("h", F.xxhash64("value"))


def _decode(dim: Any, df: Any, kind: str, hcol: str, out: str, keep: bool = False) -> Any:
    """``df`` with the name of the ``kind`` whose hash is ``hcol`` as ``out`` (a broadcast join)."""
    from pyspark.sql import functions as F

    col = F.col
    d = F.broadcast(
        dim.where(col("kind") == kind).select(
            col("rk").alias("_rk"), col("h").alias("_h"), col("value").alias(out)
        )
    )
    joined = df.join(d, (df["rk"] == d["_rk"]) & (df[hcol] == d["_h"]), "left").drop("_rk", "_h")
    return joined if keep else joined.drop(hcol)
