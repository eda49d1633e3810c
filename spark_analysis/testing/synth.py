"""Synthetic run histories with known ground truth.

Two generators:

- :class:`History` — a small, explicit history (subscriptions, messages, receipts, faults, junk
  lines) written as real ``agents/*/messages.jsonl`` logs; :meth:`History.truth` is the expected
  classification, derived from the generator's own choices. Used by the property tests.
- :func:`write_bench_run` — millions of messages generated with vectorised numpy/pyarrow and
  staged (``analysis/events.parquet`` bucketed by Spark, + a ``synthetic`` manifest), so the
  benchmark measures the reconciliation rather than the generator. Its ground truth is returned.
  ``python -m spark_analysis.testing.synth RUN_DIR MESSAGES`` does it in a process of its own and prints
  the ground truth as JSON.

Over 500 lines: the two generators encode the same classification rules (one per message, one
vectorised); they are kept side by side so a change to one is made to the other.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_analysis.statuses import STATUSES

# ---------------------------------------------------------------------------------------------
# small explicit histories (JSON Lines)
# ---------------------------------------------------------------------------------------------


@dataclass
class Sub:
    agent: str
    filter: str
    subscribed_ts: float | None  # None: never logged `subscribed` (e.g. the line was lost)
    durable: bool = True
    qos: int = 1
    resubscribes: int = 0  # extra `subscribed` records after the first (reconnects)


@dataclass
class Msg:
    msg_id: str
    publisher: str
    topic: str
    qos: int
    first_attempt_ts: float
    fate: str  # "acknowledged" | "dropped" | "in_doubt"
    attempts: int = 1
    drop_reason: str = "publisher_timeout"
    handed: bool = False  # the drop record's handed_to_broker: the broker may still deliver it
    # receipts: subscription index -> receipt timestamps
    receipts: dict[int, list[float]] = field(default_factory=dict)


@dataclass
class Fault:
    fault_id: str
    start: float
    end: float | None
    fault: str = "kill"
    target: str = "broker-a"


@dataclass
class History:
    run: str
    subs: list[Sub]
    msgs: list[Msg]
    #: receipts of msg_ids nobody attempted: (sub index, msg_id, ts)
    unexpected: list[tuple[int, str, float]] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    #: junk lines appended to the first agent's log (each one malformed)
    junk: list[str] = field(default_factory=list)
    #: end the publisher's log with a torn (half-written) record
    torn_tail: bool = False

    # -- writing ---------------------------------------------------------------------------
    def records(self) -> dict[str, list[dict[str, Any]]]:
        """Log records per agent, each agent's records in time order."""
        out: dict[str, list[tuple[float, int, dict[str, Any]]]] = {}
        n = 0

        def add(agent: str, rec: dict[str, Any]) -> None:
            nonlocal n
            n += 1
            out.setdefault(agent, []).append((rec["ts"], n, {"run": self.run, "agent": agent, **rec}))

        for s in self.subs:
            if s.subscribed_ts is None:
                continue
            for k in range(1 + s.resubscribes):
                add(
                    s.agent,
                    {
                        "ts": s.subscribed_ts + 7.0 * k,
                        "event": "subscribed",
                        "topic": s.filter,
                        "broker": "127.0.0.1:1883",
                        "qos": s.qos,
                        "durable": s.durable,
                    },
                )
        for m in self.msgs:
            common = {"msg_id": m.msg_id, "topic": m.topic}
            for a in range(1, m.attempts + 1):
                rec = {"ts": m.first_attempt_ts + 0.5 * (a - 1), "event": "send_attempt", **common}
                add(m.publisher, {**rec, "broker": "127.0.0.1:1883", "attempt": a, "qos": m.qos})
            end = m.first_attempt_ts + 0.5 * (m.attempts - 1)
            if m.fate == "acknowledged":
                rec = {"ts": end + 0.01, "event": "sent", **common, "broker": "127.0.0.1:1883"}
                add(m.publisher, {**rec, "attempts": m.attempts, "qos": m.qos})
            elif m.fate == "dropped":
                rec = {"ts": end + 0.02, "event": "dropped", **common}
                drop = {**rec, "reason": m.drop_reason, "attempts": m.attempts}
                add(m.publisher, {**drop, "handed_to_broker": True} if m.handed else drop)
            for si, times in m.receipts.items():
                s = self.subs[si]
                for ts in times:
                    rec = {"ts": ts, "event": "received", **common, "broker": "127.0.0.1:1883"}
                    add(s.agent, {**rec, "subscription": s.filter})
        for si, msg_id, ts in self.unexpected:
            s = self.subs[si]
            rec = {"ts": ts, "event": "received", "msg_id": msg_id, "topic": "x/unexpected"}
            add(s.agent, {**rec, "broker": "127.0.0.1:1883", "subscription": s.filter, "extra_field": [1]})
        return {
            agent: [r for _, _, r in sorted(recs, key=lambda t: (t[0], t[1]))] for agent, recs in out.items()
        }

    def write(self, run_dir: Path) -> Path:
        run_dir.mkdir(parents=True, exist_ok=True)
        recs = self.records()
        agents = sorted(recs) or ["idle"]
        for i, agent in enumerate(agents):
            d = run_dir / "agents" / agent
            d.mkdir(parents=True, exist_ok=True)
            lines = [json.dumps(r, separators=(",", ":")) for r in recs.get(agent, [])]
            if i == 0:
                lines.extend(self.junk)
            text = "\n".join(lines) + ("\n" if lines else "")
            if self.torn_tail and i == 0:
                text += (
                    '{"ts":'
                    + str(time.time())
                    + ',"run":"'
                    + self.run
                    + '","agent":"'
                    + agent
                    + '","event":"se'
                )
            (d / "messages.jsonl").write_text(text, encoding="utf-8")
        if self.faults:
            lines = []
            for f in self.faults:
                base = {
                    "run": self.run,
                    "fault_id": f.fault_id,
                    "fault": f.fault,
                    "target": f.target,
                    "params": {},
                }
                lines.append(json.dumps({"ts": f.start, **base, "event": "fault_start"}))
                if f.end is not None:
                    lines.append(json.dumps({"ts": f.end, **base, "event": "fault_end"}))
            (run_dir / "faults.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        return run_dir

    # -- ground truth from the generator's choices --------------------------------------------
    def expected_pair(self, m: Msg, si: int) -> bool:
        s = self.subs[si]
        return (
            s.subscribed_ts is not None
            and s.subscribed_ts < m.first_attempt_ts
            and mqtt_match(s.filter, m.topic)
        )

    def pair_status(self, m: Msg, si: int) -> str | None:
        s = self.subs[si]
        n = len(m.receipts.get(si, []))
        if self.expected_pair(m, si):
            if n > 0 and m.fate != "acknowledged":
                return "ghost"
            if n == 1:
                return "ok"
            if n > 1:
                return "duplicated"
            if m.fate == "acknowledged":
                return "lost" if m.qos >= 1 and s.durable and s.qos >= 1 else "missed"
            return "dropped_expected" if m.fate == "dropped" else "in_doubt_missing"
        if n == 0:
            return None
        if m.fate != "acknowledged":
            return "ghost"
        return "extra" if mqtt_match(s.filter, m.topic) else "misrouted"

    def truth(self) -> dict[str, Any]:
        statuses: Counter[str] = Counter()
        ghosts: Counter[str] = Counter()
        expected = 0
        for m in self.msgs:
            for si in range(len(self.subs)):
                expected += self.expected_pair(m, si)
                st = self.pair_status(m, si)
                if st is None:
                    continue
                statuses[st] += 1
                if st == "ghost":
                    handed = m.fate == "dropped" and m.handed
                    kind = "in_doubt" if m.fate == "in_doubt" or handed else "dropped_other"
                    if m.fate == "dropped" and not handed and m.drop_reason == "publisher_timeout":
                        kind = "timeout"
                    ghosts[kind] += 1
        fates = Counter(m.fate for m in self.msgs)
        return {
            "totals": {
                "attempted": len(self.msgs),
                "acknowledged": fates["acknowledged"],
                "dropped": fates["dropped"],
                "in_doubt": fates["in_doubt"],
            },
            "deliveries": {
                "expected": expected,
                **{k: statuses[k] for k in (*STATUSES, "extra", "misrouted")},
            },
            "ghosts": {k: ghosts[k] for k in ("timeout", "dropped_other", "in_doubt")},
            "unexpected": len({msg_id for _, msg_id, _ in self.unexpected}),
            "malformed": len(self.junk) + int(self.torn_tail),
        }


def tiny_history(run_dir: Path) -> Path:
    """A small run folder (20 messages, two subscriptions, one fault) whose reconcile loads the
    classes and compiles the plans every real reconcile uses: a Spark warm-up."""
    t0 = time.time() - 60
    subs = [Sub("agent-1", f, t0) for f in ("w/#", "w/+/y")]
    msgs = []
    for i in range(20):
        ts = t0 + 1 + i * 0.1
        got = {0: [ts + 0.02], 1: [ts + 0.02]}
        msgs.append(Msg(f"w-{i}", "agent-1", "w/x/y", 1, ts, "acknowledged", receipts=got))
    return History("warmup", subs, msgs, faults=[Fault("f1", t0 + 1.5, t0 + 2.0)]).write(run_dir)


def mqtt_match(topic_filter: str, topic: str) -> bool:
    """MQTT filter matching via a regular expression (independent of spark_analysis.mqtt)."""
    if topic.startswith("$") and topic_filter[:1] in ("+", "#"):
        return False
    levels = topic_filter.split("/")
    multi = levels[-1] == "#"
    if multi:
        levels = levels[:-1]
        if not levels:
            return True
    pattern = "/".join("[^/]*" if level == "+" else re.escape(level) for level in levels)
    if multi:
        pattern += "(/.*)?"  # `a/#` also matches `a`
    return re.fullmatch(pattern, topic, re.DOTALL) is not None


# ---------------------------------------------------------------------------------------------
# benchmark histories (millions of messages, straight to the staged Parquet layout)
# ---------------------------------------------------------------------------------------------


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


def write_bench_run(run_dir: Path, spec: BenchSpec, spark: Any = None) -> dict[str, Any]:
    """Write a synthetic run (staged Parquet) and return its ground truth. The records are written
    per event type with pyarrow, then staged in Spark's bucket layout as a real run's logs are."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    from spark_analysis.ingest import (
        NO_FACTS,
        PARQUET_BYTES_PER_BUCKET,
        STAGE_VERSION,
        STAGED_SCHEMA,
        bucket_count,
        summarize,
        write_bucketed,
    )

    run = run_dir.name
    events_dir = run_dir / "analysis" / "events.parquet"
    flat_dir = run_dir / "analysis" / ".synthetic-events"
    shutil.rmtree(events_dir, ignore_errors=True)
    shutil.rmtree(flat_dir, ignore_errors=True)
    flat_dir.mkdir(parents=True)
    fields = [f for f in STAGED_SCHEMA.fields if f.name != "event"]
    pa_types = {
        "DoubleType()": pa.float64(),
        "StringType()": pa.string(),
        "IntegerType()": pa.int32(),
        "BooleanType()": pa.bool_(),
        "LongType()": pa.int64(),
    }
    schema = pa.schema([(f.name, pa_types[repr(f.dataType)]) for f in fields])
    writers: dict[str, Any] = {}

    def emit(event: str, cols: dict[str, Any]) -> None:
        n = len(cols["ts"])
        if n == 0:
            return
        arrays = []
        for f in schema:
            v = cols.get(f.name)
            if v is None:
                arrays.append(pa.nulls(n, f.type))
            elif isinstance(v, str):
                arrays.append(pa.DictionaryArray.from_arrays(np.zeros(n, np.int32), [v]).cast(f.type))
            else:
                arrays.append(pa.array(v, type=f.type) if not isinstance(v, pa.Array) else v)
        if event not in writers:
            d = flat_dir / f"event={event}"
            d.mkdir(parents=True, exist_ok=True)
            writers[event] = pq.ParquetWriter(str(d / "part-00000.parquet"), schema, compression="snappy")
        writers[event].write_table(pa.Table.from_arrays(arrays, schema=schema), row_group_size=1_000_000)

    rng = np.random.default_rng(spec.seed)
    t0 = 1_700_000_000.0
    totals = Counter[str]()
    deliveries = Counter[str]()
    ghosts = Counter[str]()
    topic_names = np.array([f"bench/t{k}" for k in range(spec.topics)], dtype=object)
    # subscriptions: subscribed one second before the first message
    for si, (agent, filt) in enumerate(BENCH_SUBS):
        emit(
            "subscribed",
            {
                "ts": np.array([t0 - 1.0]),
                "run": run,
                "agent": agent,
                "topic": filt,
                "broker": "127.0.0.1:1883",
                "qos": np.array([1], np.int32),
                "durable": np.array([True]),
                "seq": np.array([si], np.int64),
            },
        )
    recv_seq = [1, 1]
    for lo in range(0, spec.messages, spec.chunk):
        hi = min(spec.messages, lo + spec.chunk)
        n = hi - lo
        idx = np.arange(lo, hi, dtype=np.int64)
        ids = _ids("m", idx)
        ts = t0 + idx / spec.rate_per_s
        topic_idx = rng.integers(0, spec.topics, n)
        topics = pa.DictionaryArray.from_arrays(pa.array(topic_idx.astype(np.int32)), list(topic_names)).cast(
            pa.string()
        )
        u = rng.random(n)
        fate = np.where(
            u < spec.dropped, 1, np.where(u < spec.dropped + spec.in_doubt, 2, 0)
        )  # 0 ack 1 drop 2 doubt
        totals["attempted"] += n
        totals["acknowledged"] += int((fate == 0).sum())
        totals["dropped"] += int((fate == 1).sum())
        totals["in_doubt"] += int((fate == 2).sum())
        one = np.ones(n, np.int32)
        emit(
            "send_attempt",
            {
                "ts": ts,
                "run": run,
                "agent": "pub-0",
                "msg_id": ids,
                "topic": topics,
                "broker": "127.0.0.1:1883",
                "qos": one,
                "attempt": one,
                "seq": 2 * idx,
            },
        )
        ack = fate == 0
        emit(
            "sent",
            {
                "ts": ts[ack] + 0.004,
                "run": run,
                "agent": "pub-0",
                "msg_id": ids.filter(pa.array(ack)),
                "topic": topics.filter(pa.array(ack)),
                "broker": "127.0.0.1:1883",
                "qos": one[ack],
                "attempts": one[ack],
                "seq": 2 * idx[ack] + 1,
            },
        )
        drop = fate == 1
        emit(
            "dropped",
            {
                "ts": ts[drop] + 30.0,
                "run": run,
                "agent": "pub-0",
                "msg_id": ids.filter(pa.array(drop)),
                "topic": topics.filter(pa.array(drop)),
                "reason": "publisher_timeout",
                "attempts": one[drop] * 3,
                "seq": 2 * idx[drop] + 1,
            },
        )
        for si, (agent, filt) in enumerate(BENCH_SUBS):
            v = rng.random(n)
            count = np.ones(n, np.int64)
            count[ack & (v < spec.loss)] = 0
            count[ack & (v >= spec.loss) & (v < spec.loss + spec.duplicate)] = 2
            count[~ack] = (v[~ack] < spec.ghost).astype(np.int64)
            deliveries["expected"] += n
            deliveries["ok"] += int((ack & (count == 1)).sum())
            deliveries["duplicated"] += int((ack & (count == 2)).sum())
            deliveries["lost"] += int((ack & (count == 0)).sum())
            deliveries["ghost"] += int((~ack & (count > 0)).sum())
            deliveries["dropped_expected"] += int((drop & (count == 0)).sum())
            deliveries["in_doubt_missing"] += int((fate == 2).sum() - ((fate == 2) & (count > 0)).sum())
            ghosts["timeout"] += int((drop & (count > 0)).sum())
            ghosts["in_doubt"] += int(((fate == 2) & (count > 0)).sum())
            rep = np.repeat(np.arange(n), count)
            # receipts of one message are 5 ms apart; arrival after 10-11 ms
            first = np.r_[True, rep[1:] != rep[:-1]] if len(rep) else np.zeros(0, bool)
            rts = ts[rep] + 0.010 + 0.001 * rng.random(len(rep)) + np.where(first, 0.0, 0.005)
            # the subscriber logs receipts in arrival order
            arrival = np.argsort(rts, kind="stable")
            rep, rts = rep[arrival], rts[arrival]
            seq = np.arange(recv_seq[si], recv_seq[si] + len(rep), dtype=np.int64)
            recv_seq[si] += len(rep)
            emit(
                "received",
                {
                    "ts": rts,
                    "run": run,
                    "agent": agent,
                    "msg_id": ids.take(pa.array(rep)),
                    "topic": topics.take(pa.array(rep)),
                    "broker": "127.0.0.1:1883",
                    "subscription": filt,
                    "seq": seq,
                },
            )
    if spec.unexpected:
        k = np.arange(spec.unexpected, dtype=np.int64)
        agent, filt = BENCH_SUBS[0]
        emit(
            "received",
            {
                "ts": t0 + k * 0.5,
                "run": run,
                "agent": agent,
                "msg_id": _ids("x", k),
                "topic": "bench/t0",
                "broker": "127.0.0.1:1883",
                "subscription": filt,
                "seq": recv_seq[0] + k,
            },
        )
    for w in writers.values():
        w.close()
    if spark is None:
        from spark_analysis.session import get_spark

        spark = get_spark()
    flat_bytes = sum(p.stat().st_size for p in flat_dir.rglob("*.parquet"))
    flat = spark.read.schema(STAGED_SCHEMA).parquet(str(flat_dir))
    buckets = bucket_count(flat_bytes, PARQUET_BYTES_PER_BUCKET)
    write_bucketed(flat, events_dir, buckets)
    shutil.rmtree(flat_dir)
    staged = spark.read.schema(STAGED_SCHEMA).parquet(str(events_dir))
    facts = summarize(staged.withColumn("rk", F.lit(0))).get(0, NO_FACTS)
    duration = spec.messages / spec.rate_per_s
    faults = []
    for i in range(spec.faults):
        start = t0 + duration * (i + 1) / (spec.faults + 1)
        base = {"run": run, "fault_id": f"f{i}", "fault": "kill", "target": "broker-a", "params": {}}
        faults.append(json.dumps({"ts": start, **base, "event": "fault_start"}))
        faults.append(json.dumps({"ts": start + 5.0, **base, "event": "fault_end"}))
    (run_dir / "faults.jsonl").write_text("\n".join(faults) + "\n", encoding="utf-8")
    truth = {
        "totals": dict(totals),
        "deliveries": {k: deliveries[k] for k in ("expected", *STATUSES)},
        "ghosts": {k: ghosts[k] for k in ("timeout", "dropped_other", "in_doubt")},
        "unexpected": spec.unexpected,
    }
    manifest = {
        "version": STAGE_VERSION,
        "synthetic": True,
        "buckets": buckets,
        "facts": facts,
        "spec": spec.__dict__,
        "truth": truth,
        "sources": [],
    }
    (run_dir / "analysis" / "events.manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return truth


def bench_rows(spec: BenchSpec) -> int:
    """Approximate number of log records of a bench run (for sizing)."""
    return math.ceil(spec.messages * (2 + 2 * 1.0))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: python -m spark_analysis.testing.synth RUN_DIR MESSAGES", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(write_bench_run(Path(sys.argv[1]), BenchSpec(messages=int(sys.argv[2])))))
