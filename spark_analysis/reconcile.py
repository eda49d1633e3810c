"""The reconciliation job: account for every message of one or more runs, explain every anomaly.

Usage::

    spark-submit spark_analysis/reconcile.py --run-dir DIR [--run-dir DIR2 ...] [--master URL]
        [--policy FILE] [--settle-s N] [--max-duplicates N]
    bfh reconcile RUN_DIR [options]            # calls main(["--run-dir", RUN_DIR, ...])

Writes, per run: ``analysis/summary.json``, ``analysis/messages.parquet`` and ``analysis/report.md``.
The semantics are documented in docs/reconciliation.md. All accounting over messages is done with
Spark DataFrames; only per-run aggregates (a few rows per run) come back to the driver.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script (spark-submit spark_analysis/reconcile.py)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_analysis.frames import collect_many, top, values  # noqa: E402
from spark_analysis.guarantees import describe, downgrades  # noqa: E402
from spark_analysis.ingest import MESSAGE_EVENTS, PUBLISHER_EVENTS  # noqa: E402
from spark_analysis.policy import Policy, PolicyError, load_policy  # noqa: E402
from spark_analysis.session import master_of  # noqa: E402

STATUSES = ("ok", "duplicated", "lost", "missed", "dropped_expected", "ghost", "in_doubt_missing")
EXTRA_STATUSES = ("extra", "misrouted")
#: statuses shown as anomalies (everything but ok)
ANOMALY_STATUSES = tuple(s for s in STATUSES + EXTRA_STATUSES if s != "ok")
GHOST_KINDS = ("timeout", "dropped_other", "in_doubt")
#: percentile_approx accuracy: exact up to this many receipts per run, rank error <= n/accuracy beyond
PERCENTILE_ACCURACY = 10000


class InputError(ValueError):
    """Bad input: reported as one line, exit status 2."""


# --------------------------------------------------------------------------------------------
# run folders and fault logs (small files, read on the driver)
# --------------------------------------------------------------------------------------------


@dataclass
class Fault:
    fault_id: str
    fault: str | None = None
    target: Any = None
    params: Any = None
    start: float | None = None
    end: float | None = None


@dataclass
class RunInput:
    run_dir: Path
    run_json: dict[str, Any] | None
    faults: list[Fault] = field(default_factory=list)
    fault_lines_malformed: int = 0
    fault_examples: list[str] = field(default_factory=list)


def _read_json_object(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def read_faults(path: Path) -> tuple[list[Fault], int, list[str]]:
    """Parse faults.jsonl tolerantly: (faults with a start, malformed line count, examples)."""
    faults: dict[str, Fault] = {}
    bad = 0
    examples: list[str] = []
    if not path.is_file():
        return [], 0, []
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            text = line.strip()
            if not text:
                continue
            try:
                rec = json.loads(text)
            except ValueError:
                rec = None
            ts = _num(rec.get("ts")) if isinstance(rec, dict) else None
            ok = (
                isinstance(rec, dict)
                and ts is not None
                and rec.get("fault_id") is not None
                and rec.get("event") in ("fault_start", "fault_end")
            )
            if not ok or not isinstance(rec, dict) or ts is None:
                bad += 1
                if len(examples) < 5:
                    examples.append(text[:200])
                continue
            fid = str(rec["fault_id"])
            f = faults.setdefault(fid, Fault(fid))
            f.fault = f.fault or rec.get("fault")
            f.target = f.target if f.target is not None else rec.get("target")
            f.params = f.params if f.params is not None else rec.get("params")
            if rec["event"] == "fault_start":
                f.start = ts if f.start is None else min(f.start, ts)
            else:
                f.end = ts if f.end is None else max(f.end, ts)
    started = [f for f in faults.values() if f.start is not None]
    started.sort(key=lambda f: (f.start or 0.0, f.fault_id))
    return started, bad, examples


def load_inputs(run_dirs: list[Path]) -> list[RunInput]:
    out = []
    for d in run_dirs:
        faults, bad, examples = read_faults(d / "faults.jsonl")
        out.append(RunInput(d, _read_json_object(d / "run.json"), faults, bad, examples))
    return out


def _run_id_from_json(run_json: dict[str, Any] | None) -> str | None:
    if not run_json:
        return None
    for key in ("run", "run_id", "id"):
        value = run_json.get(key)
        if isinstance(value, str) and value:
            return value
    return None


# --------------------------------------------------------------------------------------------
# the Spark job
# --------------------------------------------------------------------------------------------


def _recovery_horizon_s() -> float:
    """Seconds after a fault's window searched for recoveries in the main job
    (``BFH_RECOVERY_HORIZON_S``, default 120); a later first success costs one more scan."""
    return max(0.0, float(os.environ.get("BFH_RECOVERY_HORIZON_S") or 120.0))


def _seconds(df: Any, start: str, end: str) -> Any:
    """``df`` with one row per whole second in [floor(start), floor(end)] (column ``sec``): turns a
    range join on time into an equi-join on (rk, sec)."""
    from pyspark.sql import functions as F

    last = F.least(F.floor(end), F.floor(start) + 2_000_000)
    return df.select("*", F.explode(F.sequence(F.floor(start), last)).alias("sec"))


def _ooo_block_seqs() -> int:
    """Log positions per out-of-order block (``BFH_OOO_BLOCK_SEQS``, default 2^20): a block is
    sorted and buffered by one task, so this bounds a task's memory whatever the stream's length."""
    return max(1, int(os.environ.get("BFH_OOO_BLOCK_SEQS") or 1 << 20))


def _shuffle_partitions(sources: list[Any]) -> int:
    """Partitions for the message shuffles: ~16 MB of staged Parquet each (``BFH_SPARK_MB_PER_PARTITION``),
    at least 2. Small partitions keep each task's aggregation map in memory (no spill to disk)."""
    total = 0
    for s in sources:
        for p in s.events_dir.rglob("*.parquet"):
            with contextlib.suppress(OSError):
                total += p.stat().st_size
    per = int(float(os.environ.get("BFH_SPARK_MB_PER_PARTITION") or 16) * (1 << 20))
    return max(2, min(2000, math.ceil(total / per)))


#: unique-per-row columns: dictionary encoding only costs CPU before Parquet falls back
_NO_DICTIONARY = (
    "msg_id", "first_attempt_ts", "first_attempt_seq", "ack_ts", "drop_ts", "first_receipt_ts",
    "first_receipt_seq", "latency_s",
)  # fmt: skip


def _writer(w: Any) -> Any:
    w = w.mode("overwrite")
    for c in _NO_DICTIONARY:
        w = w.option(f"parquet.enable.dictionary#{c}", "false")
    return w


def _new_sub() -> dict[str, Any]:
    return {"first_ts": None, "durable": None, "qos": None, "subscribed_count": 0, "receipts": 0}


def _grouped(rows: list[dict[str, Any]], keys: list[str], value: str) -> dict[tuple[Any, ...], list[Any]]:
    out: dict[tuple[Any, ...], list[Any]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: r["_rn"]):
        out[tuple(r[k] for k in keys)].append(r[value])
    return out


class _Job:
    def __init__(self, spark: Any, inputs: list[RunInput], policy: Policy) -> None:
        self.spark = spark
        self.inputs = inputs
        self.policy = policy
        self.n = len(inputs)
        self.timings: dict[str, float] = {}

    def _tick(self, name: str, t0: float) -> float:
        now = time.time()
        self.timings[name] = round(now - t0, 3)
        return now

    def run(self) -> list[dict[str, Any]]:
        from spark_analysis.ingest import read_staged, stage

        t = time.time()
        self.sources = stage(self.spark, [i.run_dir for i in self.inputs])
        t = self._tick("stage", t)
        self.np = _shuffle_partitions(self.sources)
        conf = {
            "spark.sql.shuffle.partitions": str(self.np),
            # the staged buckets are sorted by msg_id: aggregate them as a stream, no hash map
            "spark.sql.execution.replaceHashWithSortAgg": "true",
            "spark.sql.legacy.bucketedTableScan.outputOrdering": "true",
        }
        previous = {k: self.spark.conf.get(k, None) for k in conf}
        for k, v in conf.items():
            self.spark.conf.set(k, v)
        self.scratch: Path | None = None
        try:
            with read_staged(self.spark, self.sources) as self.ev:
                self._facts()
                t = self._tick("facts", t)
                self._pairs()
                t = self._tick("messages", t)
                aggregates = self._aggregates()
                t = self._tick("aggregates", t)
            summaries = self._assemble(aggregates)
            self._write_outputs(summaries)
            self._tick("write", t)
        finally:
            for k, v in previous.items():
                if v is None:
                    self.spark.conf.unset(k)
                else:
                    self.spark.conf.set(k, v)
            if self.scratch is not None:
                shutil.rmtree(self.scratch, ignore_errors=True)
        return summaries

    # ---- stage 1: per-run facts and the small dimensions (one Spark job) ----------------------
    def _facts(self) -> None:
        from spark_analysis.ingest import FACTS_EXAMPLES, MALFORMED, facts_frames, staged_facts

        # the cube of small dimensions is kept with the staged Parquet: read it, unless a policy
        # asks for more malformed examples than were kept and some run may have them
        cached = [staged_facts(s) for s in self.sources]
        n = self.policy.examples
        if all(c is not None for c in cached) and (
            n <= FACTS_EXAMPLES or all(len(c["malformed"]) < FACTS_EXAMPLES for c in cached if c)
        ):
            got: dict[str, list[dict[str, Any]]] = {"cube": [], "malformed": []}
            for rk, c in enumerate(cached):
                assert c is not None
                got["cube"] += [{**r, "rk": rk} for r in c["cube"]]
                got["malformed"] += [{**r, "rk": rk} for r in c["malformed"] if r["_rn"] <= n]
        else:
            got = collect_many(facts_frames(self.ev, n))
        cube = got["cube"]
        self.facts = cube
        self.malformed_rows = got["malformed"]
        self.run_ids = [self._run_id(i) for i in range(self.n)]
        self.t_min: dict[int, float] = {}
        self.t_max: dict[int, float] = {}
        for r in cube:
            if r["t0"] is not None and r["event"] != MALFORMED:
                rk = r["rk"]
                self.t_min[rk] = min(self.t_min.get(rk, r["t0"]), r["t0"])
                self.t_max[rk] = max(self.t_max.get(rk, r["t1"]), r["t1"])

        # subscriptions: identity (agent, filter); durable/qos from the FIRST `subscribed` record
        subs: dict[tuple[int, str, str], dict[str, Any]] = {}
        firsts: dict[tuple[int, str, str], tuple[float, int]] = {}
        for r in cube:
            if r["event"] == "subscribed":
                key = (r["rk"], r["agent"], r["topic"])
                s = subs.setdefault(key, _new_sub())
                s["subscribed_count"] += r["n"]
                order = (r["t0"], r["s0"])
                if key not in firsts or order < firsts[key]:
                    firsts[key] = order
                    s.update(first_ts=r["t0"], durable=r["durable"], qos=r["qos"])
            elif r["event"] == "received":
                subs.setdefault((r["rk"], r["agent"], r["subscription"]), _new_sub())["receipts"] += r["n"]
        per_run: dict[int, int] = defaultdict(int)
        self.subs = []
        for (rk, agent, filt), s in sorted(subs.items()):
            self.subs.append({"rk": rk, "j": per_run[rk], "agent": agent, "filter": filt, **s})
            per_run[rk] += 1
        self.smax = max(per_run.values(), default=0)
        self.sub_at = {(s["rk"], s["j"]): s for s in self.subs}
        self.topics = sorted(
            {(r["rk"], r["topic"]) for r in cube if r["event"] in PUBLISHER_EVENTS and r["topic"] is not None}
        )
        self.dims = sorted(
            {
                (r["rk"], kind, r[kind])
                for r in cube
                if r["event"] in PUBLISHER_EVENTS
                for kind in ("agent", "topic", "reason")
                if r[kind] is not None
            }
        )

    def _run_id(self, rk: int) -> str:
        rid = _run_id_from_json(self.inputs[rk].run_json)
        if rid:
            return rid
        counts: dict[str, int] = defaultdict(int)
        for r in self.facts:
            if r["rk"] == rk and r["run"] and r["event"] != "_malformed":
                counts[r["run"]] += r["n"]
        if counts:
            return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        return self.inputs[rk].run_dir.name

    def _sub_lookup(self, field_name: str, j: Any, dtype: str) -> Any:
        """Column: ``field_name`` of subscription ``j`` of the row's run (a literal-array lookup)."""
        from pyspark.sql import functions as F

        values = [
            self.sub_at[(rk, jj)][field_name] if (rk, jj) in self.sub_at else None
            for rk in range(self.n)
            for jj in range(self.smax)
        ]
        if not values:
            return F.lit(None).cast(dtype)
        arr = F.array(*[F.lit(v).cast(dtype) for v in values])
        return F.when(j.isNotNull(), F.element_at(arr, F.col("rk") * self.smax + j + 1))

    # ---- stage 2: the per-(message, subscription) rows -> messages.parquet --------------------
    def _pairs(self) -> None:
        from pyspark.sql import functions as F

        from spark_analysis.mqtt import match_expr

        spark, ev, col, S = self.spark, self.ev, F.col, self.smax
        pol = self.policy

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
        subs_df = values(
            spark,
            [(s["rk"], s["agent"], s["filter"], s["j"]) for s in self.subs],
            "rk int, agent string, subscription string, j int",
        )
        pub = kind < 3
        rows = (
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
        k = col("kind")
        is_pub = k < 3
        # the first publisher record is the first send_attempt whenever there is one (sent and
        # dropped follow their attempts in the publisher's own log)
        aggs = [
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
        for J in range(S):
            hit = col("j") == J
            aggs += [
                F.count(F.when(hit, 1)).alias(f"n{J}"),
                F.min(F.when(hit, col("ts"))).alias(f"f{J}"),
                F.min(F.when(hit, col("seq"))).alias(f"s{J}"),
            ]
        if self.n == 1:
            # grouped by msg_id alone, the order of the sorted buckets satisfies the aggregation
            # (a constant rk in the key would not): a streaming sort aggregation, no hash map
            msg = rows.groupBy("msg_id").agg(*aggs).withColumn("rk", F.lit(0))
        else:
            msg = rows.groupBy("rk", "msg_id").agg(*aggs)
        dim = values(spark, self.dims, "rk int, kind string, value string").withColumn(
            "h", F.xxhash64("value")
        )

        def decode(df: Any, kind: str, hcol: str, out: str) -> Any:
            d = F.broadcast(
                dim.where(col("kind") == kind).select(
                    col("rk").alias("_rk"), col("h").alias("_h"), col("value").alias(out)
                )
            )
            return df.join(d, (df["rk"] == d["_rk"]) & (df[hcol] == d["_h"]), "left").drop("_rk", "_h", hcol)

        msg = decode(msg, "agent", "publisher_h", "publisher")
        msg = decode(msg, "topic", "topic_h", "topic")
        msg = decode(msg, "reason", "reason_h", "drop_reason")
        attempted = col("pub_records") > 0
        msg = msg.withColumn(
            "state",
            F.when(~attempted, F.lit("unexpected"))
            .when(col("ack_ts").isNotNull(), F.lit("acknowledged"))
            .when(col("drop_ts").isNotNull(), F.lit("dropped"))
            .otherwise(F.lit("in_doubt")),
        )
        # which subscriptions' filters match each topic: distinct topics x subscriptions (small),
        # matched in Spark SQL, pivoted to one boolean per run-local subscription index
        if S:
            topics = values(spark, self.topics, "rk int, topic string")
            subs_f = subs_df.select("rk", "j", col("subscription").alias("filter"))
            tm = (
                topics.join(F.broadcast(subs_f), "rk")
                .where(match_expr("filter", "topic"))
                .groupBy("rk", "topic")
                .agg(*[F.max(col("j") == J).alias(f"m{J}") for J in range(S)])
            )
            msg = msg.join(F.broadcast(tm), ["rk", "topic"], "left")

        # one row per (message, subscription) pair that is expected, matched or received; one row
        # without subscription for a message that has none of them
        keeps: list[Any] = []
        structs = []
        for J in range(S):
            m = F.coalesce(col(f"m{J}"), F.lit(False))
            keep = m | (col(f"n{J}") > 0)
            sub_first = self._sub_lookup("first_ts", F.lit(J), "double")
            expected = F.coalesce(m & (sub_first < col("first_attempt_ts")), F.lit(False))
            first = keep
            for prev in keeps:
                first = first & ~prev
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
            keeps.append(keep)
        none_keep = F.lit(True)
        for kp in keeps:
            none_keep = none_keep & ~kp
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
        msg_cols = [
            "rk", "msg_id", "publisher", "topic", "qos", "state", "attempts", "attempt_records",
            "first_attempt_ts", "first_attempt_seq", "ack_ts", "drop_ts", "drop_reason",
            "drop_handed",
        ]  # fmt: skip
        pairs = msg.select(*msg_cols, F.inline(F.array(*structs))).where(col("keep"))
        j = col("j")
        durable = self._sub_lookup("durable", j, "boolean")
        sub_qos = self._sub_lookup("qos", j, "int")
        n = col("received")
        attempted = col("state") != "unexpected"
        expected = col("expected")
        acked = col("state") == "acknowledged"
        alo = (
            (F.coalesce(col("qos"), F.lit(0)) >= 1)
            & F.coalesce(durable, F.lit(False))
            & (F.coalesce(sub_qos, F.lit(1)) >= 1)
        )
        status = (
            F.when(j.isNull(), F.lit(None).cast("string"))
            .when(~attempted, F.lit("unexpected"))
            .when(expected & (n > 0) & ~acked, F.lit("ghost"))
            .when(expected & (n == 1), F.lit("ok"))
            .when(expected & (n > 1), F.lit("duplicated"))
            .when(expected & acked & alo, F.lit("lost"))
            .when(expected & acked, F.lit("missed"))
            .when(expected & (col("state") == "dropped"), F.lit("dropped_expected"))
            .when(expected, F.lit("in_doubt_missing"))
            .when((n > 0) & ~acked, F.lit("ghost"))
            .when((n > 0) & col("matches"), F.lit("extra"))
            .when(n > 0, F.lit("misrouted"))
        )
        # dropped after a broker was handed the message: its fate was unknown at the drop
        handed_drop = (col("state") == "dropped") & F.coalesce(col("drop_handed"), F.lit(False))
        ghost_kind = (
            F.when(col("state") == "in_doubt", F.lit("in_doubt"))
            .when(handed_drop, F.lit("in_doubt"))
            .when(col("drop_reason").isin(*pol.ghost_timeout_reasons), F.lit("timeout"))
            .otherwise(F.lit("dropped_other"))
        )
        run_name = F.element_at(F.array(*[F.lit(r) for r in self.run_ids]), col("rk") + 1)
        has_sub = j.isNotNull()
        out = pairs.select(
            "rk",
            run_name.alias("run"),
            "msg_id",
            "publisher",
            "topic",
            "qos",
            "state",
            "attempts",
            "attempt_records",
            "first_attempt_ts",
            "first_attempt_seq",
            "ack_ts",
            "drop_ts",
            "drop_reason",
            j.alias("sub_index"),
            self._sub_lookup("agent", j, "string").alias("subscriber"),
            self._sub_lookup("filter", j, "string").alias("subscription"),
            durable.alias("durable"),
            sub_qos.alias("sub_qos"),
            F.when(has_sub, expected).alias("expected"),
            F.when(has_sub & attempted, F.when(alo, "at-least-once").otherwise("best-effort")).alias(
                "guarantee"
            ),
            n.alias("received"),
            "first_receipt_ts",
            "first_receipt_seq",
            (col("first_receipt_ts") - col("first_attempt_ts")).alias("latency_s"),
            status.alias("status"),
            F.when(status == "ghost", ghost_kind).alias("ghost_kind"),
            "msg_row",
        )
        # one write, partitioned by run; each partition later moves into its run folder
        analysis0 = self.inputs[0].run_dir / "analysis"
        analysis0.mkdir(parents=True, exist_ok=True)
        self.scratch = Path(tempfile.mkdtemp(prefix=".reconcile-", dir=analysis0))
        self.messages_path = self.scratch / "messages"
        if self.n == 1:  # no partitioning, hence no sort before the write
            _writer(out.drop("rk").write).parquet(str(self.messages_path / "rk=0"))
        else:
            _writer(out.write.partitionBy("rk")).parquet(str(self.messages_path))
        self.msgs = spark.read.schema(out.schema).parquet(str(self.messages_path))

    # ---- stage 3: every per-run aggregate, in one Spark job ------------------------------------
    def _aggregates(self) -> dict[str, list[dict[str, Any]]]:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        col, m, pol, one = F.col, self.msgs, self.policy, F.count(F.lit(1)).alias("n")
        frames: dict[str, Any] = {}
        frames["rows"] = m.groupBy(
            "rk", "msg_row", "state", "status", "ghost_kind", "guarantee", "expected"
        ).agg(
            one,
            F.sum("received").alias("receipts"),
            F.count(
                F.when(col("msg_row") & (col("state") == "acknowledged") & col("drop_ts").isNotNull(), 1)
            ).alias("conflicting"),
        )
        # the anomalous pairs are few: one scan keeps them in memory for the examples and the
        # fault attribution (instead of a scan of messages.parquet for each)
        anomalies = (
            m.where(col("status").isin(*ANOMALY_STATUSES, "unexpected"))
            .select("rk", "msg_id", "subscriber", "subscription", "status", "ghost_kind", "first_attempt_ts")
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        kind = F.when(col("status") == "ghost", F.concat(F.lit("ghost_"), col("ghost_kind"))).otherwise(
            col("status")
        )
        frames["examples"] = top(
            anomalies.withColumn("kind", kind),
            ["rk", "kind"],
            ["msg_id", "subscriber", "subscription"],
            ["msg_id"],
            pol.examples,
        )
        received = m.where(col("latency_s").isNotNull() & (col("state") != "unexpected"))
        frames["latency"] = received.groupBy("rk").agg(
            F.percentile_approx("latency_s", [0.5, 0.95, 0.99], PERCENTILE_ACCURACY).alias("p"),
            F.max("latency_s").alias("max"),
            one,
        )
        frames.update(self._ooo_frames(received))
        frames.update(self._fault_frames(anomalies.where(col("status") != "unexpected")))
        try:
            anomalies.count()  # filled before the job that reads it three times
            got = collect_many(frames)
        finally:
            anomalies.unpersist()
        got["streams"] = self._ooo_streams(got)
        self._late_recoveries(got)
        return got

    def _ooo_frames(self, received: Any) -> dict[str, Any]:
        """Out of order: per (subscription, publisher) stream, a first receipt of a message sent
        before another message of that publisher that was already received on the stream.

        Each stream is cut into blocks of receipt order (``BFH_OOO_BLOCK_SEQS`` log positions), so
        no task sorts or buffers a whole stream: a receipt is out of order when its send order is
        below the running max of the earlier receipts of its block or the max of the earlier
        blocks (a small window over the per-block maxima, broadcast). One row per block comes back:
        receipts, out-of-order count and the log positions of its first out-of-order receipts."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        col, pol = F.col, self.policy
        size = _ooo_block_seqs()
        # numeric keys only: the publisher travels as its hash (names come back from `dims`)
        keys = ["rk", "sub_index", "pub_h", "blk"]
        r = received.select(
            "rk",
            "sub_index",
            F.xxhash64("publisher").alias("pub_h"),
            F.floor(col("first_receipt_seq") / size).cast("long").alias("blk"),
            col("first_receipt_seq").alias("seq"),
            col("first_attempt_seq").alias("a"),
        )
        blocks = r.groupBy(*keys).agg(F.max("a").alias("bmax"))
        before = Window.partitionBy(*keys[:3]).orderBy("blk").rowsBetween(Window.unboundedPreceding, -1)
        # a block's number (bid) stands for its four keys: the shuffle and the sort carry one long
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
            "bid", "seq", F.coalesce(col("a") < F.greatest("pmax", running), F.lit(False)).alias("ooo")
        )
        # the examples: the block's out-of-order positions (a list as long as that count at most)
        firsts = F.array_sort(F.collect_list(F.when(col("ooo"), col("seq"))))
        per_block = flagged.groupBy("bid").agg(
            F.count(F.lit(1)).alias("receipts"),
            F.count(F.when(col("ooo"), 1)).alias("n"),
            F.slice(firsts, 1, max(1, pol.examples)).alias("example_seqs"),
        )
        names = values(
            self.spark,
            [(rk, v) for rk, kind, v in self.dims if kind == "agent"],
            "rk int, publisher string",
        )
        return {
            "ooo": per_block.join(F.broadcast(prefix.select("bid", *keys)), "bid"),
            "publishers": names.select("rk", "publisher", F.xxhash64("publisher").alias("pub_h")),
        }

    def _ooo_streams(self, got: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """Per stream: receipts, out-of-order count and the first examples (msg_ids, in receipt
        order), from the per-block rows."""
        from pyspark.sql import functions as F

        names = {(r["rk"], r["pub_h"]): r["publisher"] for r in got.get("publishers", [])}
        streams: dict[tuple[int, int, int], dict[str, Any]] = {}
        for b in got.get("ooo", []):
            key = (b["rk"], b["sub_index"], b["pub_h"])
            sub = self.sub_at[key[:2]]
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
            s["examples"] = [(rk, j, q) for q in sorted(s["examples"])[: self.policy.examples]]
            wanted.update(s["examples"])
        if wanted:
            found = (
                self.msgs.where(F.col("first_receipt_seq").isin(*sorted({k[2] for k in wanted})))
                .select("rk", "sub_index", "first_receipt_seq", "msg_id")
                .collect()
            )
            ids = {(f["rk"], f["sub_index"], f["first_receipt_seq"]): f["msg_id"] for f in found}
            for s in streams.values():
                s["examples"] = [ids.get(k) for k in s["examples"]]
        return list(streams.values())

    def _fault_windows(self) -> list[tuple[int, int, float, float]]:
        windows = []  # (rk, fault_idx, start, end of window incl. settle margin)
        for rk, inp in enumerate(self.inputs):
            for fi, f in enumerate(inp.faults):
                assert f.start is not None
                end = f.end if f.end is not None else max(self.t_max.get(rk, f.start), f.start)
                windows.append((rk, fi, f.start, max(end, f.start) + self.policy.settle_s))
        return windows

    def _fault_frames(self, anomalies: Any) -> dict[str, Any]:
        """Per fault: the anomalies (of ``anomalies``, the non-ok pairs) whose first attempt falls
        in its window, and the successes of every role around it."""
        from pyspark.sql import functions as F

        col, spark, pol = F.col, self.spark, self.policy
        windows = self._fault_windows()
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
            an, ["rk", "fault_idx", "status"], ["msg_id", "subscriber"], ["msg_id"], pol.examples
        )
        frames["fault_roles"] = self._fault_roles(fw, windows)
        return frames

    def _successes(self) -> Any:
        """Acknowledged sends (publisher) and receipts (subscriber:<filter>), per agent role."""
        from pyspark.sql import functions as F

        col = F.col
        return self.ev.where(col("event").isin("sent", "received")).select(
            "rk",
            "agent",
            F.when(col("event") == "received", col("subscription")).alias("sub"),
            (col("event") == "sent").alias("is_ack"),
            "ts",
        )

    def _fault_roles(self, fw: Any, windows: list[tuple[int, int, float, float]]) -> Any:
        """Per fault and role: successes inside [start, end + settle] and the first one at or
        after the start, looked for up to :func:`_recovery_horizon_s` after the window (later ones:
        :meth:`_late_recoveries`, only for the roles that need it)."""
        from pyspark.sql import functions as F

        col, horizon = F.col, _recovery_horizon_s()
        succ = self._successes()
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

    def _late_recoveries(self, got: dict[str, list[dict[str, Any]]]) -> None:
        """The first success after the horizon, for each (fault, role) with none before it: one
        more scan, only when some role recovered late or never."""
        from pyspark.sql import functions as F

        found = {
            (r["rk"], r["fault_idx"], r["agent"], r["is_ack"], r["sub"]) for r in got.get("fault_roles", [])
        }
        roles = {rk: self._roles(rk) for rk in range(self.n)}
        horizon = _recovery_horizon_s()
        missing = [
            (rk, fi, agent, is_ack, sub, wend + horizon)
            for rk, fi, _, wend in self._fault_windows()
            for agent, is_ack, sub in roles[rk]
            if (rk, fi, agent, is_ack, sub) not in found
        ]
        if not missing:
            return
        col = F.col
        want = values(
            self.spark,
            missing,
            "rk int, fault_idx int, agent string, is_ack boolean, wsub string, after double",
        )
        late = (
            self._successes()
            .join(F.broadcast(want), ["rk", "agent", "is_ack"])
            .where(col("sub").eqNullSafe(col("wsub")) & (col("ts") > col("after")))
            .groupBy("rk", "fault_idx", "agent", "is_ack", "sub")
            .agg(F.min("ts").alias("t"))
        )
        got["fault_roles"] = got.get("fault_roles", []) + [
            {**r.asDict(), "in_window": 0} for r in late.collect()
        ]

    def _roles(self, rk: int) -> list[tuple[str, bool, str | None]]:
        """(agent, is_ack, subscription) of every role of a run: publishers with an acknowledged
        send, subscriptions with a receipt."""
        return sorted(
            {(r["agent"], True, None) for r in self.facts if r["rk"] == rk and r["event"] == "sent"}
            | {
                (r["agent"], False, r["subscription"])
                for r in self.facts
                if r["rk"] == rk and r["event"] == "received"
            },
            key=lambda x: (x[0], x[1], x[2] or ""),
        )

    # ---- stage 4: summaries and verdicts (driver, a few rows per run) -------------------------
    def _faults_summary(self, rk: int, got: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
        windows = [w for w in self._fault_windows() if w[0] == rk]
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
        examples = _grouped(
            [r for r in got.get("fault_examples", []) if r["rk"] == rk], ["fault_idx", "status"], "msg_id"
        )
        anomalies: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
        for r in got.get("fault_anomalies", []):
            if r["rk"] == rk:
                anomalies[r["fault_idx"]][r["status"]] = {
                    "count": r["n"],
                    "examples": examples.get((r["fault_idx"], r["status"]), []),
                }
        roles = sorted(
            {(agent, role({"is_ack": is_ack, "sub": sub})) for agent, is_ack, sub in self._roles(rk)}
        )
        out = []
        for _, fi, start, wend in windows:
            f = self.inputs[rk].faults[fi]
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

    def _assemble(self, got: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
        from spark_analysis.ingest import KNOWN_EVENTS, MALFORMED

        pol = self.policy
        examples = _grouped(got["examples"], ["rk", "kind"], "msg_id")
        summaries = []
        for rk, inp in enumerate(self.inputs):
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
            streams = [{k: v for k, v in st.items() if k != "rk"} for st in got["streams"] if st["rk"] == rk]
            streams.sort(key=lambda s: (s["subscriber"] or "", s["subscription"] or "", s["publisher"] or ""))
            facts = [r for r in self.facts if r["rk"] == rk]
            by_reason: dict[str, int] = defaultdict(int)
            for r in facts:
                if r["event"] == MALFORMED:
                    by_reason[r["bad_reason"]] += r["n"]
            if inp.fault_lines_malformed:
                by_reason["faults_log"] = inp.fault_lines_malformed
            mal_examples = [
                {"file": _short_path(e["file"], inp.run_dir), "reason": e["bad_reason"], "line": e["raw"]}
                for e in sorted((r for r in self.malformed_rows if r["rk"] == rk), key=lambda r: r["_rn"])
            ] + [{"file": "faults.jsonl", "reason": "faults_log", "line": x} for x in inp.fault_examples]

            def ex(kind: str, _rk: int = rk) -> list[str]:
                return examples.get((_rk, kind), [])

            summary: dict[str, Any] = {
                "run": self.run_ids[rk],
                "verdict": "pass",
                "totals": {
                    **totals,
                    "records": sum(r["n"] for r in facts),
                    "receipts": sum(r["n"] for r in facts if r["event"] == "received"),
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
                    for s in self.subs
                    if s["rk"] == rk
                ],
                "faults": self._faults_summary(rk, got),
                "malformed": {
                    "count": sum(by_reason.values()),
                    "by_reason": dict(sorted(by_reason.items())),
                    "examples": mal_examples[: pol.examples],
                },
                "ignored_records": sum(
                    r["n"] for r in facts if r["event"] not in KNOWN_EVENTS and r["event"] != MALFORMED
                ),
                "time_span": [self.t_min.get(rk), self.t_max.get(rk)],
                # the guarantee each agent's workload (run.json) demanded vs what it used
                "downgrades": downgrades(inp.run_json, facts),
            }
            reasons, warnings = _judge(summary, pol, ex)
            summary["verdict"] = "fail" if reasons else "pass"
            summary["reasons"] = reasons
            summary["warnings"] = warnings
            summary["policy"] = pol.to_dict()
            summary["run_dir"] = str(inp.run_dir)
            summary["engine"] = {
                "spark": self.spark.version,
                "master": master_of(self.spark),
                "shuffle_partitions": self.np,
                "runs_in_job": self.n,
                "timings_s": dict(self.timings),
                "generated_at": time.time(),
            }
            summaries.append(summary)
        return summaries

    def _write_outputs(self, summaries: list[dict[str, Any]]) -> None:
        from spark_analysis.report import render_report

        for rk, (inp, summary) in enumerate(zip(self.inputs, summaries, strict=True)):
            analysis = inp.run_dir / "analysis"
            analysis.mkdir(parents=True, exist_ok=True)
            target = analysis / "messages.parquet"
            produced = self.messages_path / f"rk={rk}"
            if not produced.is_dir():
                produced.mkdir(parents=True)
            old = analysis / f".messages.parquet.old-{os.getpid()}"
            if target.exists():
                target.rename(old)
            shutil.move(str(produced), str(target))
            shutil.rmtree(old, ignore_errors=True)
            _write_text(analysis / "summary.json", json.dumps(summary, indent=2, default=str) + "\n")
            _write_text(analysis / "report.md", render_report(summary))


def _short_path(path: str | None, run_dir: Path) -> str | None:
    if not path:
        return path
    p = path.removeprefix("file://")
    try:
        return str(Path(p).relative_to(run_dir))
    except ValueError:  # staged before the run folder was moved or copied: agents/<agent>/...
        cut = p.rfind("/agents/")
        return p[cut + 1 :] if cut >= 0 else p


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def _judge(
    summary: dict[str, Any], pol: Policy, ex: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
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


def reconcile(
    run_dirs: list[Path],
    *,
    policy: Policy | None = None,
    master: str | None = None,
    spark: Any = None,
) -> list[dict[str, Any]]:
    """Reconcile the runs in one Spark job; write each run's analysis/ files; return the summaries."""
    if not run_dirs:
        raise InputError("no run directory given")
    dirs = []
    for d in run_dirs:
        p = Path(d).expanduser().resolve()
        if not p.is_dir():
            raise InputError(f"run directory not found: {d}")
        dirs.append(p)
    if len(set(dirs)) != len(dirs):
        raise InputError("the same run directory is given twice")
    if spark is None:
        from spark_analysis.session import get_spark

        spark = get_spark(master)
    job = _Job(spark, load_inputs(dirs), policy or Policy())
    return job.run()


class _ArgError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one clear line instead of usage + message
        raise _ArgError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="reconcile", description="Reconcile broker-failover run folders.")
    p.add_argument("run_dirs", nargs="*", metavar="RUN_DIR", help="run folder(s)")
    p.add_argument("--run-dir", action="append", default=[], dest="run_dir_opts", metavar="DIR")
    p.add_argument("--master", default=None, help="Spark master URL (default local[2])")
    p.add_argument("--policy", default=None, help="verdict policy file (JSON or YAML)")
    p.add_argument(
        "--settle-s", type=float, default=None, help="seconds after a fault still attributed to it"
    )
    p.add_argument("--max-duplicates", type=int, default=None, help="duplicated deliveries tolerated")
    p.add_argument("--quiet", action="store_true", help="no per-run line on stdout")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        dirs = [Path(d) for d in [*args.run_dirs, *args.run_dir_opts]]
        if not dirs:
            raise _ArgError("give at least one run directory (RUN_DIR or --run-dir DIR)")
        if args.settle_s is not None and (args.settle_s < 0 or not math.isfinite(args.settle_s)):
            raise _ArgError("--settle-s must be a non-negative number")
        if args.max_duplicates is not None and args.max_duplicates < 0:
            raise _ArgError("--max-duplicates must be a non-negative integer")
        policy = load_policy(args.policy, settle_s=args.settle_s, max_duplicates=args.max_duplicates)
        summaries = reconcile(dirs, policy=policy, master=args.master)
    except (_ArgError, InputError, PolicyError) as exc:
        print(f"reconcile: error: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        for s in summaries:
            reasons = "; ".join(f"{r['kind']}={r['count']}" for r in s["reasons"]) or "-"
            print(
                f"{s['run']}: {s['verdict']} (attempted={s['totals']['attempted']} "
                f"expected={s['deliveries']['expected']} ok={s['deliveries']['ok']}) reasons: {reasons} "
                f"-> {s['run_dir']}/analysis/summary.json"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
