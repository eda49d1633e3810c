"""Benchmark histories: millions of messages, straight to the staged Parquet layout.

:func:`write_bench_run` generates them with vectorised numpy/pyarrow and stages them
(``analysis/events.parquet`` bucketed by Spark, + a ``synthetic`` manifest), so the benchmark
measures the reconciliation rather than the generator. Its ground truth is returned. The rules
are those of :class:`spark_analysis.testing.synth.History` (one message at a time there): a
change to one is made to the other.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_analysis.statuses import STATUSES


@dataclass(frozen=True)
class BenchSpec:
    messages: int
    seed: int = 7
    rate_per_s: float = 2000.0
    topics: int = 4
    loss: float = 0.001  # acknowledged, a subscription never receives it
    duplicate: float = 0.002  # acknowledged, a subscription receives it twice
    dropped: float = 0.001  # publisher gave up (publisher_timeout)
    in_doubt: float = 0.0005  # never acknowledged nor dropped
    ghost: float = 0.5  # share of dropped / in-doubt pairs that are received anyway
    unexpected: int = 50  # received msg_ids never attempted (on the first subscription)
    faults: int = 3
    chunk: int = 2_000_000


BENCH_SUBS = (("sub-0", "bench/#"), ("sub-1", "bench/+"))
BROKER = "127.0.0.1:1883"
T0 = 1_700_000_000.0


def _ids(prefix: str, idx: Any) -> Any:
    """pyarrow string array ``<prefix><10 digits>`` built without Python loops."""
    import numpy as np
    import pyarrow as pa

    n = len(idx)
    p = prefix.encode()
    width = len(p) + 10
    buf = np.empty((n, width), dtype=np.uint8)
    buf[:, : len(p)] = np.frombuffer(p, dtype=np.uint8)
    v = idx.astype(np.int64).copy()
    for k in range(width - 1, len(p) - 1, -1):
        buf[:, k] = 48 + (v % 10)
        v //= 10
    offsets = np.arange(0, width * (n + 1), width, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(buf.tobytes()))


class _Writer:
    """One flat Parquet file per event type, in the staged schema (less its `event` column)."""

    def __init__(self, flat_dir: Path) -> None:
        import pyarrow as pa

        from spark_analysis.ingest import STAGED_SCHEMA

        self.flat_dir = flat_dir
        pa_types = {
            "DoubleType()": pa.float64(),
            "StringType()": pa.string(),
            "IntegerType()": pa.int32(),
            "BooleanType()": pa.bool_(),
            "LongType()": pa.int64(),
        }
        fields = [f for f in STAGED_SCHEMA.fields if f.name != "event"]
        self.schema = pa.schema([(f.name, pa_types[repr(f.dataType)]) for f in fields])
        self.writers: dict[str, Any] = {}

    def emit(self, event: str, cols: dict[str, Any]) -> None:
        import numpy as np
        import pyarrow as pa
        import pyarrow.parquet as pq

        n = len(cols["ts"])
        if n == 0:
            return
        arrays = []
        for f in self.schema:
            v = cols.get(f.name)
            if v is None:
                arrays.append(pa.nulls(n, f.type))
            elif isinstance(v, str):
                arrays.append(pa.DictionaryArray.from_arrays(np.zeros(n, np.int32), [v]).cast(f.type))
            else:
                arrays.append(pa.array(v, type=f.type) if not isinstance(v, pa.Array) else v)
        if event not in self.writers:
            d = self.flat_dir / f"event={event}"
            d.mkdir(parents=True, exist_ok=True)
            self.writers[event] = pq.ParquetWriter(
                str(d / "part-00000.parquet"), self.schema, compression="snappy"
            )
        table = pa.Table.from_arrays(arrays, schema=self.schema)
        self.writers[event].write_table(table, row_group_size=1_000_000)

    def close(self) -> None:
        for w in self.writers.values():
            w.close()


@dataclass
class _Truth:
    totals: Counter[str]
    deliveries: Counter[str]
    ghosts: Counter[str]


def _subscriptions(out: _Writer, run: str) -> None:
    """Subscribed one second before the first message."""
    import numpy as np

    for si, (agent, filt) in enumerate(BENCH_SUBS):
        out.emit(
            "subscribed",
            {
                "ts": np.array([T0 - 1.0]),
                "run": run,
                "agent": agent,
                "topic": filt,
                "broker": BROKER,
                "qos": np.array([1], np.int32),
                "durable": np.array([True]),
                "seq": np.array([si], np.int64),
            },
        )


def _publish(out: _Writer, run: str, spec: BenchSpec, rng: Any, lo: int, hi: int, truth: _Truth) -> Any:
    """Messages [lo, hi): attempted, then acknowledged, dropped or left in doubt. Returns
    (ids, ts, topics, fate) for their receipts; fate 0 ack, 1 drop, 2 in doubt."""
    import numpy as np
    import pyarrow as pa

    n = hi - lo
    idx = np.arange(lo, hi, dtype=np.int64)
    ids = _ids("m", idx)
    ts = T0 + idx / spec.rate_per_s
    names = [f"bench/t{k}" for k in range(spec.topics)]
    topic_idx = rng.integers(0, spec.topics, n)
    topics = pa.DictionaryArray.from_arrays(pa.array(topic_idx.astype(np.int32)), names).cast(pa.string())
    u = rng.random(n)
    fate = np.where(u < spec.dropped, 1, np.where(u < spec.dropped + spec.in_doubt, 2, 0))
    truth.totals["attempted"] += n
    truth.totals["acknowledged"] += int((fate == 0).sum())
    truth.totals["dropped"] += int((fate == 1).sum())
    truth.totals["in_doubt"] += int((fate == 2).sum())
    one = np.ones(n, np.int32)
    base = {"run": run, "agent": "pub-0", "msg_id": ids, "topic": topics, "broker": BROKER}
    out.emit("send_attempt", {**base, "ts": ts, "qos": one, "attempt": one, "seq": 2 * idx})
    for event, mask, extra in (
        ("sent", fate == 0, {"dt": 0.004, "broker": BROKER, "qos": one, "attempts": one}),
        ("dropped", fate == 1, {"dt": 30.0, "reason": "publisher_timeout", "attempts": one * 3}),
    ):
        sel = pa.array(mask)
        cols = {k: v[mask] if isinstance(v, np.ndarray) else v for k, v in extra.items() if k != "dt"}
        out.emit(
            event,
            {
                "ts": ts[mask] + extra["dt"],
                "run": run,
                "agent": "pub-0",
                "msg_id": ids.filter(sel),
                "topic": topics.filter(sel),
                "seq": 2 * idx[mask] + 1,
                **cols,
            },
        )
    return ids, ts, topics, fate


def _receive(
    out: _Writer, run: str, spec: BenchSpec, rng: Any, msgs: Any, seqs: list[int], truth: _Truth
) -> None:
    """Each subscription's receipts of the messages: lost, once, twice, or a ghost."""
    import numpy as np
    import pyarrow as pa

    ids, ts, topics, fate = msgs
    n = len(ts)
    ack, drop = fate == 0, fate == 1
    for si, (agent, filt) in enumerate(BENCH_SUBS):
        v = rng.random(n)
        count = np.ones(n, np.int64)
        count[ack & (v < spec.loss)] = 0
        count[ack & (v >= spec.loss) & (v < spec.loss + spec.duplicate)] = 2
        count[~ack] = (v[~ack] < spec.ghost).astype(np.int64)
        d = truth.deliveries
        d["expected"] += n
        d["ok"] += int((ack & (count == 1)).sum())
        d["duplicated"] += int((ack & (count == 2)).sum())
        d["lost"] += int((ack & (count == 0)).sum())
        d["ghost"] += int((~ack & (count > 0)).sum())
        d["dropped_expected"] += int((drop & (count == 0)).sum())
        d["in_doubt_missing"] += int((fate == 2).sum() - ((fate == 2) & (count > 0)).sum())
        truth.ghosts["timeout"] += int((drop & (count > 0)).sum())
        truth.ghosts["in_doubt"] += int(((fate == 2) & (count > 0)).sum())
        rep = np.repeat(np.arange(n), count)
        # receipts of one message are 5 ms apart; arrival after 10-11 ms
        first = np.r_[True, rep[1:] != rep[:-1]] if len(rep) else np.zeros(0, bool)
        rts = ts[rep] + 0.010 + 0.001 * rng.random(len(rep)) + np.where(first, 0.0, 0.005)
        # the subscriber logs receipts in arrival order
        arrival = np.argsort(rts, kind="stable")
        rep, rts = rep[arrival], rts[arrival]
        seq = np.arange(seqs[si], seqs[si] + len(rep), dtype=np.int64)
        seqs[si] += len(rep)
        taken = pa.array(rep)
        out.emit(
            "received",
            {
                "ts": rts,
                "run": run,
                "agent": agent,
                "msg_id": ids.take(taken),
                "topic": topics.take(taken),
                "broker": BROKER,
                "subscription": filt,
                "seq": seq,
            },
        )


def _unexpected(out: _Writer, run: str, spec: BenchSpec, seq0: int) -> None:
    import numpy as np

    if not spec.unexpected:
        return
    k = np.arange(spec.unexpected, dtype=np.int64)
    agent, filt = BENCH_SUBS[0]
    out.emit(
        "received",
        {
            "ts": T0 + k * 0.5,
            "run": run,
            "agent": agent,
            "msg_id": _ids("x", k),
            "topic": "bench/t0",
            "broker": BROKER,
            "subscription": filt,
            "seq": seq0 + k,
        },
    )


def _stage(spark: Any, flat_dir: Path, events_dir: Path) -> tuple[int, Any]:
    """The flat files, staged in Spark's bucket layout as a real run's logs are: (buckets, facts)."""
    from pyspark.sql import functions as F

    from spark_analysis.ingest import (
        NO_FACTS,
        PARQUET_BYTES_PER_BUCKET,
        STAGED_SCHEMA,
        bucket_count,
        summarize,
        write_bucketed,
    )

    if spark is None:
        from spark_analysis.session import get_spark

        spark = get_spark()
    flat_bytes = sum(p.stat().st_size for p in flat_dir.rglob("*.parquet"))
    flat = spark.read.schema(STAGED_SCHEMA).parquet(str(flat_dir))
    buckets = bucket_count(flat_bytes, PARQUET_BYTES_PER_BUCKET)
    write_bucketed(flat, events_dir, buckets)
    shutil.rmtree(flat_dir)
    staged = spark.read.schema(STAGED_SCHEMA).parquet(str(events_dir))
    return buckets, summarize(staged.withColumn("rk", F.lit(0))).get(0, NO_FACTS)


def _faults(run_dir: Path, spec: BenchSpec) -> None:
    """Kill windows of 5 s spread evenly over the run."""
    duration = spec.messages / spec.rate_per_s
    lines = []
    for i in range(spec.faults):
        start = T0 + duration * (i + 1) / (spec.faults + 1)
        base = {"run": run_dir.name, "fault_id": f"f{i}", "fault": "kill", "target": "broker-a", "params": {}}
        lines.append(json.dumps({"ts": start, **base, "event": "fault_start"}))
        lines.append(json.dumps({"ts": start + 5.0, **base, "event": "fault_end"}))
    (run_dir / "faults.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_bench_run(run_dir: Path, spec: BenchSpec, spark: Any = None) -> dict[str, Any]:
    """Write a synthetic run (staged Parquet) and return its ground truth. The records are written
    per event type with pyarrow, then staged in Spark's bucket layout as a real run's logs are."""
    import numpy as np

    from spark_analysis.ingest import STAGE_VERSION

    run = run_dir.name
    events_dir = run_dir / "analysis" / "events.parquet"
    flat_dir = run_dir / "analysis" / ".synthetic-events"
    shutil.rmtree(events_dir, ignore_errors=True)
    shutil.rmtree(flat_dir, ignore_errors=True)
    flat_dir.mkdir(parents=True)
    out = _Writer(flat_dir)
    rng = np.random.default_rng(spec.seed)
    truth = _Truth(Counter(), Counter(), Counter())
    _subscriptions(out, run)
    seqs = [1, 1]
    for lo in range(0, spec.messages, spec.chunk):
        msgs = _publish(out, run, spec, rng, lo, min(spec.messages, lo + spec.chunk), truth)
        _receive(out, run, spec, rng, msgs, seqs, truth)
    _unexpected(out, run, spec, seqs[0])
    out.close()
    buckets, facts = _stage(spark, flat_dir, events_dir)
    _faults(run_dir, spec)
    result = {
        "totals": dict(truth.totals),
        "deliveries": {k: truth.deliveries[k] for k in ("expected", *STATUSES)},
        "ghosts": {k: truth.ghosts[k] for k in ("timeout", "dropped_other", "in_doubt")},
        "unexpected": spec.unexpected,
    }
    manifest = {
        "version": STAGE_VERSION,
        "synthetic": True,
        "buckets": buckets,
        "facts": facts,
        "spec": spec.__dict__,
        "truth": result,
        "sources": [],
    }
    (run_dir / "analysis" / "events.manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return result


def bench_rows(spec: BenchSpec) -> int:
    """Approximate number of log records of a bench run (for sizing)."""
    return math.ceil(spec.messages * (2 + 2 * 1.0))


def main(argv: list[str]) -> int:
    """``RUN_DIR MESSAGES``: write a bench run, print its ground truth as JSON."""
    if len(argv) != 2:
        print("usage: python -m spark_analysis.testing.synth RUN_DIR MESSAGES", file=sys.stderr)
        return 2
    print(json.dumps(write_bench_run(Path(argv[0]), BenchSpec(messages=int(argv[1])))))
    return 0
