"""Stage 3a: out-of-order first receipts, per (subscription, publisher) stream."""

from __future__ import annotations

import os
from typing import Any

from spark_analysis.facts import Facts
from spark_analysis.frames import values
from spark_analysis.policy import Policy


def ooo_block_seqs() -> int:
    """Log positions per out-of-order block (``BFH_OOO_BLOCK_SEQS``, default 2^20): a block is
    sorted and buffered by one task, so this bounds a task's memory whatever the stream's length."""
    return max(1, int(os.environ.get("BFH_OOO_BLOCK_SEQS") or 1 << 20))


def ooo_frames(spark: Any, received: Any, facts: Facts, policy: Policy) -> dict[str, Any]:
    """Out of order: per (subscription, publisher) stream, a first receipt of a message sent
    before another message of that publisher that was already received on the stream.

    Each stream is cut into blocks of receipt order (``BFH_OOO_BLOCK_SEQS`` log positions), so
    no task sorts or buffers a whole stream: a receipt is out of order when its send order is
    below the running max of the earlier receipts of its block or the max of the earlier
    blocks (a small window over the per-block maxima, broadcast). One row per block comes back:
    receipts, out-of-order count and the log positions of its first out-of-order receipts."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    col, pol = F.col, policy
    size = ooo_block_seqs()
    # numeric keys only: the publisher travels as its hash (names come back from `dims`)
    keys = ["rk", "sub_index", "pub_h", "blk"]
    r = received.select(
        "rk",
        "sub_index",
        F.coalesce(col("publisher_h"), F.xxhash64(F.lit(None).cast("string"))).alias("pub_h"),
        F.floor(col("first_receipt_seq") / size).cast("long").alias("blk"),
        col("first_receipt_seq").alias("seq"),
        col("first_attempt_seq").alias("a"),
    )
    blocks = r.groupBy(*keys).agg(F.max("a").alias("bmax"))
    before = Window.partitionBy(*keys[:3]).orderBy("blk").rowsBetween(Window.unboundedPreceding, -1)
    # a block's number (bid) stands for its four keys: the window partitions by one long
    prefix = blocks.select(
        *keys,
        F.max("bmax").over(before).alias("pmax"),
        (
            col("rk").cast("long") * (1 << 32)
            + F.row_number().over(Window.partitionBy("rk").orderBy(*keys[1:]))
        )
        .cast("long")
        .alias("bid"),
    )
    order = Window.partitionBy("bid").orderBy("seq")
    running = F.max("a").over(order.rowsBetween(Window.unboundedPreceding, -1))
    flagged = r.join(F.broadcast(prefix), keys).select(
        *keys, "bid", "seq", F.coalesce(col("a") < F.greatest("pmax", running), F.lit(False)).alias("ooo")
    )
    # the examples: the block's out-of-order positions (a list as long as that count at most)
    firsts = F.array_sort(F.collect_list(F.when(col("ooo"), col("seq"))))
    per_block = flagged.groupBy("bid").agg(
        # the keys a bid stands for, carried along (a join back to prefix is a second broadcast)
        *[F.min(k).alias(k) for k in keys],
        F.count(F.lit(1)).alias("receipts"),
        F.count(F.when(col("ooo"), 1)).alias("n"),
        F.slice(firsts, 1, max(1, pol.examples)).alias("example_seqs"),
    )
    names = values(
        spark,
        [(rk, v) for rk, kind, v in facts.dims if kind == "agent"],
        "rk int, publisher string",
    )
    return {
        "ooo": per_block,
        "publishers": names.select("rk", "publisher", F.xxhash64("publisher").alias("pub_h")),
    }


def ooo_streams(
    got: dict[str, list[dict[str, Any]]], msgs: Any, facts: Facts, policy: Policy
) -> list[dict[str, Any]]:
    """Per stream: receipts, out-of-order count and the first examples (msg_ids, in receipt
    order), from the per-block rows."""
    from pyspark.sql import functions as F

    names = {(r["rk"], r["pub_h"]): r["publisher"] for r in got.get("publishers", [])}
    streams: dict[tuple[int, int, int], dict[str, Any]] = {}
    for b in got.get("ooo", []):
        key = (b["rk"], b["sub_index"], b["pub_h"])
        sub = facts.sub_at[key[:2]]
        s = streams.setdefault(
            key,
            {
                "rk": key[0],
                "subscriber": sub["agent"],
                "subscription": sub["filter"],
                "publisher": names.get((key[0], key[2])),
                "receipts": 0,
                "out_of_order": 0,
                "examples": [],
            },
        )
        s["receipts"] += b["receipts"]
        s["out_of_order"] += b["n"]
        s["examples"] += b["example_seqs"] or []
    # a receipt's seq is unique in its run and orders the stream: the first few overall
    wanted: set[tuple[int, int, int]] = set()
    for (rk, j, _), s in streams.items():
        s["examples"] = [(rk, j, q) for q in sorted(s["examples"])[: policy.examples]]
        wanted.update(s["examples"])
    if wanted:
        # one SQL IN list (a hash set once optimized), not a py4j literal per value
        seqs = ",".join(str(int(q)) for q in sorted({k[2] for k in wanted}))
        found = (
            msgs.where(F.expr(f"first_receipt_seq IN ({seqs})"))
            .select("rk", "sub_index", "first_receipt_seq", "msg_id")
            .collect()
        )
        ids = {(f["rk"], f["sub_index"], f["first_receipt_seq"]): f["msg_id"] for f in found}
        for s in streams.values():
            s["examples"] = [ids.get(k) for k in s["examples"]]
    return list(streams.values())
