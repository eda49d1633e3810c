"""Stage 3: every per-run aggregate of the classified pairs, in one Spark job: counts per class,
examples, latency percentiles, out-of-order streams (spark_analysis.ordering) and the fault
attribution (spark_analysis.attribution). Only these few rows per run come back to the driver."""

from __future__ import annotations

from typing import Any

from spark_analysis.attribution import fault_frames, late_recoveries
from spark_analysis.facts import Facts
from spark_analysis.frames import collect_many, top
from spark_analysis.inputs import RunInput
from spark_analysis.ordering import ooo_frames, ooo_streams
from spark_analysis.policy import Policy
from spark_analysis.statuses import ANOMALY_STATUSES

#: percentile_approx accuracy: exact up to this many receipts per run, rank error <= n/accuracy beyond
PERCENTILE_ACCURACY = 10000
#: the latency histogram's bins: quarter decades, the first holding everything up to 1 ms
BINS_PER_DECADE, FIRST_BIN = 4, -12


def latency_bin(latency: Any) -> Any:
    """Column: the histogram bin of a latency: bin b holds [10^(b/4), 10^((b+1)/4)) seconds, the
    first bin also everything shorter."""
    from pyspark.sql import functions as F

    b = F.floor(F.log10(F.greatest(latency, F.lit(1e-9))) * BINS_PER_DECADE)
    return F.greatest(b, F.lit(FIRST_BIN)).cast("int")


def aggregates(
    spark: Any, ev: Any, msgs: Any, shown: Any, inputs: list[RunInput], facts: Facts, policy: Policy
) -> dict[str, list[dict[str, Any]]]:
    """Every per-run aggregate of the pairs ``msgs``, collected in one Spark job (plus the late
    recoveries' scan when a role recovered after the horizon or never). ``shown``: the listed
    pairs (pairs.listed, named), persisted by the caller: the examples and the fault attribution
    read them (instead of a scan of every pair for each)."""
    from pyspark.sql import functions as F

    col, m, pol, one = F.col, msgs, policy, F.count(F.lit(1)).alias("n")
    frames: dict[str, Any] = {}
    frames["rows"] = m.groupBy("rk", "msg_row", "state", "status", "ghost_kind", "guarantee", "expected").agg(
        one,
        F.sum("received").alias("receipts"),
        F.count(
            F.when(col("msg_row") & (col("state") == "acknowledged") & col("drop_ts").isNotNull(), 1)
        ).alias("conflicting"),
    )
    anomalies = shown.where(col("status").isin(*ANOMALY_STATUSES, "unexpected")).select(
        "rk", "msg_id", "subscriber", "subscription", "status", "ghost_kind", "first_attempt_ts"
    )
    kind = F.when(col("status") == "ghost", F.concat(F.lit("ghost_"), col("ghost_kind"))).otherwise(
        col("status")
    )
    # distinct messages: a message lost on every subscription is one example, not one per pair
    frames["examples"] = top(
        anomalies.select("rk", kind.alias("kind"), "msg_id").distinct(),
        ["rk", "kind"],
        ["msg_id"],
        ["msg_id"],
        pol.examples,
    )
    received = m.where(col("latency_s").isNotNull() & (col("state") != "unexpected"))
    frames["latency"] = received.groupBy("rk").agg(
        F.percentile_approx("latency_s", [0.5, 0.95, 0.99], PERCENTILE_ACCURACY).alias("p"),
        F.max("latency_s").alias("max"),
        one,
    )
    # per (publisher, subscription) flow: the classes of its pairs (the verdict's per-path view)
    frames["flows"] = (
        m.where(col("status").isNotNull() & (col("status") != "unexpected"))
        .groupBy(
            "rk",
            F.coalesce(col("publisher_h"), F.xxhash64(F.lit(None).cast("string"))).alias("pub_h"),
            "sub_index",
            "status",
        )
        .agg(one, F.sum("received").alias("receipts"))
    )
    frames["latency_bins"] = received.groupBy("rk", latency_bin(col("latency_s")).alias("bin")).agg(one)
    frames.update(ooo_frames(spark, received, facts, policy))
    non_ok = anomalies.where(col("status") != "unexpected")
    frames.update(fault_frames(spark, ev, non_ok, inputs, facts, policy))
    shown.count()  # filled before the job that reads it three times
    got = collect_many(frames)
    got["streams"] = ooo_streams(got, msgs, facts, policy)
    late_recoveries(spark, ev, got, inputs, facts, policy)
    return got
