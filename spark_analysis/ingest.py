"""Stage message logs as Parquet once, then reuse them.

``RUN_DIR/agents/*/messages.jsonl`` -> ``RUN_DIR/analysis/events.parquet/`` plus
``RUN_DIR/analysis/events.manifest.json`` (the source files' sizes and mtimes, the bucket count).
A later job reuses the Parquet while the manifest matches the sources, so a nightly history is
parsed once.

The staged Parquet is bucketed by ``msg_id`` (Spark's own bucket layout: one file per bucket,
sorted by ``msg_id``), so the job's per-message aggregation reads each bucket in one task with no
shuffle and, the files being sorted, no hash map either.

Every line is kept: records that cannot be used are staged with event ``_malformed``, the reason,
the file and the raw text, so the reconciliation can count and show them instead of crashing.
Records that name another run than run.json's are staged with event ``_foreign``: counted, never
classified (the verdict's evidence check names them).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from harness.contracts.msglog import EVENTS, read_clock_offsets
from spark_analysis.frames import collect_many, top

STAGE_VERSION = 4
EVENTS_DIR = "events.parquet"
MANIFEST = "events.manifest.json"
MALFORMED = "_malformed"
FOREIGN = "_foreign"

MESSAGE_EVENTS = ("send_attempt", "sent", "dropped", "received")
PUBLISHER_EVENTS = ("send_attempt", "sent", "dropped")
#: every event of the message-log contract (others are counted as ignored records)
KNOWN_EVENTS = tuple(sorted(EVENTS))

#: the fields of the message-log contract the job reads (others are ignored)
RECORD_FIELDS: list[tuple[str, T.DataType]] = [
    ("ts", T.DoubleType()),
    ("run", T.StringType()),
    ("agent", T.StringType()),
    ("event", T.StringType()),
    ("msg_id", T.StringType()),
    ("topic", T.StringType()),
    ("broker", T.StringType()),
    ("subscription", T.StringType()),
    ("qos", T.IntegerType()),
    ("durable", T.BooleanType()),
    ("attempt", T.IntegerType()),
    ("attempts", T.IntegerType()),
    ("reason", T.StringType()),
    ("role", T.StringType()),
    ("handed_to_broker", T.BooleanType()),
]

#: schema of the staged Parquet
STAGED_SCHEMA = T.StructType(
    [T.StructField(n, t) for n, t in RECORD_FIELDS if n != "event"]
    + [
        T.StructField("seq", T.LongType()),
        T.StructField("bad_reason", T.StringType()),
        T.StructField("raw", T.StringType()),
        T.StructField("file", T.StringType()),
        T.StructField("event", T.StringType()),
    ]
)

#: the staging job's output: partitioned by run key
_RK_STAGED = T.StructType([*STAGED_SCHEMA.fields, T.StructField("rk", T.IntegerType())])
NO_FACTS: dict[str, list[dict[str, Any]]] = {"cube": [], "malformed": []}

_PARSE_SCHEMA = T.StructType(
    [T.StructField(n, t) for n, t in RECORD_FIELDS] + [T.StructField("_corrupt", T.StringType())]
)


@dataclass(frozen=True)
class RunSources:
    run_dir: Path
    files: list[Path]
    run_id: str | None = None  # run.json's: records naming another run are staged as FOREIGN
    # run.json's clock offsets per agent (an agent on another host: --backend swarm), added to ts
    clocks: dict[str, float] = field(default_factory=dict)

    @property
    def events_dir(self) -> Path:
        return self.run_dir / "analysis" / EVENTS_DIR

    @property
    def manifest_path(self) -> Path:
        return self.run_dir / "analysis" / MANIFEST


def discover(run_dir: Path, run_id: str | None = None) -> RunSources:
    files = sorted(p for p in (run_dir / "agents").glob("*/messages.jsonl") if p.is_file())
    return RunSources(run_dir, files, run_id, read_clock_offsets(run_dir))


def fingerprint(run_dir: Path, files: list[Path]) -> list[dict[str, Any]]:
    """Sizes and mtimes of the sources, by path relative to the run folder (a moved or copied
    run folder keeps its staged Parquet)."""
    out = []
    for p in files:
        st = p.stat()
        out.append(
            {"path": p.relative_to(run_dir).as_posix(), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        )
    return out


def read_manifest(src: RunSources) -> dict[str, Any] | None:
    try:
        data = json.loads(src.manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_fresh(src: RunSources) -> bool:
    """True when the staged Parquet exists and was made from exactly the current sources."""
    manifest = read_manifest(src)
    if manifest is None or manifest.get("version") != STAGE_VERSION or not src.events_dir.is_dir():
        return False
    if manifest.get("synthetic"):
        return True
    if manifest.get("clocks", {}) != src.clocks:
        return False
    return manifest.get("run_id") == src.run_id and manifest.get("sources") == fingerprint(
        src.run_dir, src.files
    )


#: bytes of input per bucket of staged Parquet (~16 MB of Parquet each)
JSONL_BYTES_PER_BUCKET = 96 << 20
PARQUET_BYTES_PER_BUCKET = 16 << 20
MAX_BUCKETS = 1024


def bucket_count(nbytes: int, per_bucket: int = JSONL_BYTES_PER_BUCKET) -> int:
    """Buckets for a staged run made of ``nbytes`` of input (``BFH_STAGE_BUCKETS`` overrides)."""
    fixed = os.environ.get("BFH_STAGE_BUCKETS")
    if fixed:
        return max(1, min(MAX_BUCKETS, int(fixed)))
    return max(1, min(MAX_BUCKETS, math.ceil(nbytes / per_bucket)))


def buckets_of(src: RunSources) -> int:
    manifest = read_manifest(src) or {}
    n = manifest.get("buckets")
    return n if isinstance(n, int) and n > 0 else 1


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _location(path: Path) -> str:
    return "'" + str(path).replace("\\", "\\\\").replace("'", "\\'") + "'"


def write_bucketed(df: DataFrame, out: Path, buckets: int, partition_by: tuple[str, ...] = ()) -> None:
    """Write staged rows (STAGED_SCHEMA columns, plus ``partition_by``) to ``out`` bucketed and
    sorted by ``msg_id``: one file per bucket (and partition), the layout ``read_staged`` opens."""
    spark = df.sparkSession
    name = f"bfh_stage_{uuid.uuid4().hex}"
    cols = [*partition_by, *(f.name for f in STAGED_SCHEMA.fields)]
    w = df.select(*cols).repartition(buckets, "msg_id").write.mode("overwrite")
    if partition_by:
        w = w.partitionBy(*partition_by)
    try:
        w.bucketBy(buckets, "msg_id").sortBy("msg_id").option("path", str(out)).saveAsTable(name)
    finally:  # an external table: dropping it keeps the files
        spark.sql(f"DROP TABLE IF EXISTS {name}")


#: malformed-record examples kept with the staged facts (a policy asking for more recomputes them)
FACTS_EXAMPLES = 20


def facts_frames(ev: DataFrame, examples: int) -> dict[str, DataFrame]:
    """The per-run facts of staged events (column ``rk``): the "cube" of small dimensions (events,
    agents, topics, filters, reasons, with counts and first/last times), a few rows per run, and
    the first ``examples`` malformed records of each run."""
    col, ev_ = F.col, F.col("event")
    # one scan, one hash aggregation with numeric buffers; only the keys each event type needs
    # (fewer strings hashed on the big events)
    keyed = ev.select(
        "rk",
        "event",
        F.when(~ev_.isin("received", "sent"), col("run")).alias("run"),
        "bad_reason",
        "agent",
        F.when(ev_ != "received", col("topic")).alias("topic"),
        F.when(ev_ == "received", col("subscription")).alias("subscription"),
        F.when(ev_ == "dropped", col("reason")).alias("reason"),
        F.when(ev_ == "subscribed", col("durable")).alias("durable"),
        F.when(ev_.isin("subscribed", "send_attempt", "sent"), col("qos")).alias("qos"),
        "ts",
        "seq",
    )
    keys = ["rk", "event", "run", "bad_reason", "agent", "topic", "subscription", "reason", "durable", "qos"]
    return {
        "cube": keyed.groupBy(*keys).agg(
            F.count(F.lit(1)).alias("n"),
            F.min("ts").alias("t0"),
            F.max("ts").alias("t1"),
            F.min("seq").alias("s0"),
        ),
        "malformed": top(
            ev.where(col("event") == MALFORMED),
            ["rk"],
            ["file", "seq"],
            ["file", "bad_reason", "raw"],
            examples,
        ),
    }


def summarize(ev: DataFrame) -> dict[int, dict[str, list[dict[str, Any]]]]:
    """Facts of staged events per ``rk``, as JSON-ready rows (kept in each run's manifest)."""
    out: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for name, rows in collect_many(facts_frames(ev, FACTS_EXAMPLES)).items():
        for r in rows:
            out.setdefault(r.pop("rk"), {"cube": [], "malformed": []})[name].append(r)
    return out


def staged_facts(src: RunSources) -> dict[str, list[dict[str, Any]]] | None:
    """The facts kept with a run's staged Parquet, or None (staged before they were kept)."""
    facts = (read_manifest(src) or {}).get("facts")
    if (
        isinstance(facts, dict)
        and isinstance(facts.get("cube"), list)
        and isinstance(facts.get("malformed"), list)
    ):
        return facts
    return None


def write_manifest(src: RunSources, **extra: Any) -> None:
    data = {
        "version": STAGE_VERSION,
        "sources": fingerprint(src.run_dir, src.files),
        "run_id": src.run_id,
        **({"clocks": src.clocks} if src.clocks else {}),
        "staged_at": time.time(),
        **extra,
    }
    tmp = src.manifest_path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    tmp.replace(src.manifest_path)


def _parse(text: DataFrame) -> DataFrame:
    """Raw lines (value, rk, want_run, clock) -> staged rows (rk + STAGED_SCHEMA); `clock`: a map
    of agent -> seconds added to its records' ts (null: every agent on the harness host's clock)."""
    r = F.from_json(
        "value", _PARSE_SCHEMA, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt"}
    ).alias("r")
    df = text.select("rk", "want_run", "clock", F.monotonically_increasing_id().alias("seq"), "value", r)
    col = F.col
    ev = col("r.event")
    no_fields = col("r.ts").isNull() & ev.isNull() & col("r.agent").isNull()
    bad = (
        F.when(col("r").isNull() | (col("r._corrupt").isNotNull() & no_fields), F.lit("unparseable"))
        .when(col("r._corrupt").isNotNull(), F.lit("bad_type"))
        .when(col("r.ts").isNull(), F.lit("missing_ts"))
        .when(ev.isNull(), F.lit("missing_event"))
        .when(col("r.agent").isNull(), F.lit("missing_agent"))
        .when(ev.isin(*MESSAGE_EVENTS) & col("r.msg_id").isNull(), F.lit("missing_msg_id"))
        .when((ev == "received") & col("r.subscription").isNull(), F.lit("missing_subscription"))
        .when(ev.isin("subscribed", "send_attempt") & col("r.topic").isNull(), F.lit("missing_topic"))
    )
    df = df.withColumn("bad_reason", bad)
    is_bad = col("bad_reason").isNotNull()
    foreign = col("r.run").isNotNull() & col("want_run").isNotNull() & (col("r.run") != col("want_run"))
    fields = [F.when(~is_bad, col(f"r.{n}")).cast(t).alias(n) for n, t in RECORD_FIELDS if n != "event"]
    shift = F.coalesce(F.try_element_at(col("clock"), col("r.agent")), F.lit(0.0))
    fields[0] = F.when(~is_bad, col("r.ts") + shift).cast(T.DoubleType()).alias("ts")
    return df.select(
        "rk",
        *fields,
        "seq",
        "bad_reason",
        F.when(is_bad, F.substring("value", 1, 300)).alias("raw"),
        F.when(is_bad, F.input_file_name()).alias("file"),
        F.when(is_bad, F.lit(MALFORMED)).when(foreign, F.lit(FOREIGN)).otherwise(ev).alias("event"),
    )


def stage(
    spark: SparkSession,
    run_dirs: list[Path],
    *,
    run_ids: list[str | None] | None = None,
    force: bool = False,
) -> list[RunSources]:
    """Make sure every run's logs are staged as Parquet; parse only the stale ones, in one job.
    ``run_ids`` (run.json's, per folder): records naming another run are staged as FOREIGN."""
    ids = run_ids or [None] * len(run_dirs)
    sources = [discover(d, rid) for d, rid in zip(run_dirs, ids, strict=True)]
    todo = [(i, s) for i, s in enumerate(sources) if force or not is_fresh(s)]
    with_files = [(i, s) for i, s in todo if s.files]
    if with_files:
        scratch_root = with_files[0][1].run_dir / "analysis"
        scratch_root.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=".staging-", dir=scratch_root))
        try:
            text: DataFrame | None = None
            for i, s in with_files:
                part = (
                    spark.read.text([str(p) for p in s.files])
                    .where(F.length(F.trim("value")) > 0)
                    .withColumn("rk", F.lit(i))
                    .withColumn("want_run", F.lit(s.run_id).cast("string"))
                    .withColumn("clock", _clock_map(s.clocks))
                )
                text = part if text is None else text.unionByName(part)
            assert text is not None
            buckets = bucket_count(sum(p.stat().st_size for _, s in with_files for p in s.files))
            write_bucketed(_parse(text), scratch / "out", buckets, ("rk",))
            # the small dimensions of each run, once: later jobs read them from the manifest
            facts = summarize(spark.read.schema(_RK_STAGED).parquet(str(scratch / "out")))
            for i, s in with_files:
                produced = scratch / "out" / f"rk={i}"
                if not produced.is_dir():  # only blank lines
                    produced.mkdir(parents=True)
                _replace_dir(produced, s.events_dir)
                write_manifest(s, buckets=buckets, facts=facts.get(i, NO_FACTS))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    for _, s in todo:
        if not s.files:
            s.events_dir.parent.mkdir(parents=True, exist_ok=True)
            if s.events_dir.exists():
                shutil.rmtree(s.events_dir)
            s.events_dir.mkdir()
            write_manifest(s, buckets=1, facts=NO_FACTS)
    return sources


def _clock_map(clocks: dict[str, float]) -> Any:
    """A map column of agent -> clock offset (a typed null when there is none)."""
    if not clocks:
        return F.lit(None).cast(T.MapType(T.StringType(), T.DoubleType()))
    return F.create_map(*[x for a, off in sorted(clocks.items()) for x in (F.lit(a), F.lit(float(off)))])


def _replace_dir(new: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    if target.exists():
        target.rename(old)
    shutil.move(str(new), str(target))
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def read_staged(spark: SparkSession, sources: list[RunSources]) -> Iterator[DataFrame]:
    """All runs' staged events as one DataFrame with the run key ``rk`` (index in ``sources``).

    Each run is opened as a bucketed table (a temporary catalog entry over its folder: Spark knows
    a bucket layout only from the catalog), so one run's events come partitioned by ``msg_id``.
    Several runs are unioned, and Spark shuffles them by (run, msg_id) as it must.
    """
    cols = ", ".join(f"{_quote(f.name)} {f.dataType.simpleString()}" for f in STAGED_SCHEMA.fields)
    names: list[str] = []
    try:
        out: DataFrame | None = None
        for i, s in enumerate(sources):
            name = f"bfh_events_{uuid.uuid4().hex}"
            spark.sql(
                f"CREATE TABLE {name} ({cols}) USING parquet CLUSTERED BY (msg_id) SORTED BY (msg_id) "
                f"INTO {buckets_of(s)} BUCKETS LOCATION {_location(s.events_dir)}"
            )
            names.append(name)
            frame = spark.table(name).withColumn("rk", F.lit(i))
            out = frame if out is None else out.unionByName(frame)
        assert out is not None
        yield out
    finally:
        for name in names:
            spark.sql(f"DROP TABLE IF EXISTS {name}")
