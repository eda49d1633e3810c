"""The reconciliation job: account for every message of one or more runs, explain every anomaly.

Usage::

    spark-submit spark_analysis/reconcile.py --run-dir DIR [--run-dir DIR2 ...] [--master URL]
        [--policy FILE] [--settle-s N] [--max-duplicates N] [--all-pairs]
    bfh reconcile RUN_DIR [options]            # calls main(["--run-dir", RUN_DIR, ...])

Writes, per run: ``analysis/summary.json``, ``analysis/messages.parquet`` (by default the pairs
that are not ``ok`` and the messages not acknowledged; every pair with ``--all-pairs``) and
``analysis/report.md``.
The semantics are documented in docs/reconciliation.md. All accounting over messages is done with
Spark DataFrames; only per-run aggregates (a few rows per run) come back to the driver.

The stages, each a module taking and returning named values: inputs (run.json, the fault log),
ingest (staging), facts, pairs (the classified (message, subscription) rows), aggregates (with
ordering and attribution), summary (the summaries: counts and evidence). This module runs
them in order and is the command line.
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
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script (spark-submit spark_analysis/reconcile.py)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_analysis.aggregates import aggregates  # noqa: E402
from spark_analysis.facts import read_facts  # noqa: E402
from spark_analysis.ingest import RunSources, read_staged, stage  # noqa: E402
from spark_analysis.inputs import InputError, RunInput, load_inputs, run_id_from_json  # noqa: E402
from spark_analysis.markdown import render_reconciliation_md  # noqa: E402
from spark_analysis.pairs import classify, listed, named, write_by_run, write_pairs  # noqa: E402
from spark_analysis.policy import Policy, PolicyError, load_policy  # noqa: E402
from spark_analysis.session import master_of  # noqa: E402
from spark_analysis.summary import assemble  # noqa: E402
from spark_analysis.widepairs import classify_wide, wide_enough  # noqa: E402

__all__ = ["DeadlineError", "InputError", "job_conf", "main", "reconcile", "run_dirs"]

#: seconds one stage of the job may take (``BFH_RECONCILE_STAGE_S``): far past any measured stage
#: (the 10M-message benchmark's longest, about 60 s), so only a stall reaches it
STAGE_DEADLINE_S = 900.0


class DeadlineError(RuntimeError):
    """A stage of the job passed its deadline; its Spark jobs were cancelled. Exit status 2."""


class _Watchdog:
    """Cancels the session's Spark jobs when the current stage passes its deadline; the job then
    ends in a DeadlineError naming the stage, never a silent wait (a local JVM starved beside a
    CPU hog sat 4.5 minutes in one stage)."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        try:
            self.limit = float(os.environ.get("BFH_RECONCILE_STAGE_S") or STAGE_DEADLINE_S)
        except ValueError:
            self.limit = STAGE_DEADLINE_S
        self.expired: str | None = None
        self._timer: threading.Timer | None = None

    def enter(self, stage: str) -> None:
        self.check()
        self.stop()
        self._timer = threading.Timer(self.limit, self._expire, args=(stage,))
        self._timer.daemon = True
        self._timer.start()

    def _expire(self, stage: str) -> None:
        self.expired = stage
        try:  # a Connect session: its own operations; a local one has no interruptAll
            self.spark.interruptAll()
        except Exception:  # noqa: BLE001 - pyspark raises its own types for either kind
            with contextlib.suppress(Exception):
                self.spark.sparkContext.cancelAllJobs()

    def check(self) -> None:
        if self.expired:
            raise DeadlineError(
                f"the reconcile's {self.expired!r} stage passed its {self.limit:g} s deadline "
                "(BFH_RECONCILE_STAGE_S) and its Spark jobs were cancelled. Fix: reconcile the "
                "run folder again on a less loaded machine (bfh reconcile RUN_DIR)"
            )

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _shuffle_partitions(sources: list[RunSources]) -> int:
    """Partitions for the message shuffles: ~16 MB of staged Parquet each (``BFH_SPARK_MB_PER_PARTITION``),
    at least 2. Small partitions keep each task's aggregation map in memory (no spill to disk)."""
    total = 0
    for s in sources:
        for p in s.events_dir.rglob("*.parquet"):
            with contextlib.suppress(OSError):
                total += p.stat().st_size
    per = int(float(os.environ.get("BFH_SPARK_MB_PER_PARTITION") or 16) * (1 << 20))
    return max(2, min(2000, math.ceil(total / per)))


INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


#: the job's session settings (restored afterwards: the session may be shared). ``small``: the
#: runs' logs are scenario-sized (under SMALL_INPUT_BYTES): expressions and stages are interpreted,
#: not compiled (Janino and the JIT cost more than a few thousand rows take to evaluate: a masterslave
#: run's first reconcile 14.5 -> 10.7 CPU-s, warm ones 5.1-5.5 -> 4.3-4.7, 2026-12-08)
def job_conf(partitions: int, small: bool = False) -> dict[str, str]:
    return {
        **(INTERPRETED if small else {}),
        "spark.sql.shuffle.partitions": str(partitions),
        # the staged buckets are sorted by msg_id: aggregate them as a stream, no hash map
        "spark.sql.execution.replaceHashWithSortAgg": "true",
        "spark.sql.legacy.bucketedTableScan.outputOrdering": "true",
        # adaptive execution runs every shuffle and broadcast as a Spark job of its own: dozens of
        # ~0.1 s jobs per reconcile, where the partitions are already sized from the input
        "spark.sql.adaptive.enabled": "false",
        # only the joins hinted as broadcasts (literal tables): without adaptive execution an
        # estimate would broadcast a million pairs
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        # every write goes to a scratch folder, moved into place afterwards: the committer's
        # second rename pass and its _SUCCESS marker only cost time
        "mapreduce.fileoutputcommitter.algorithm.version": "2",
        "mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    }


def run_job(
    spark: Any, inputs: list[RunInput], policy: Policy, all_pairs: bool = False, classifier: Any = None
) -> list[dict[str, Any]]:
    """The stages in order: stage the logs, facts, pairs, aggregates, summaries; then each run's
    analysis/ files (``messages.parquet``: the listed pairs, or every pair with ``all_pairs``).
    Returns the summaries. ``classifier``: the pairs stage's classify(); by default the wide
    plan for runs with few subscriptions, else spark_analysis.pairs' (rows of matches and
    receipts: a fleet's)."""
    timings: dict[str, float] = {}
    t = time.time()
    watchdog = _Watchdog(spark)
    order = ["stage", "facts", "messages", "aggregates", "output"]

    def tick(name: str) -> None:
        nonlocal t
        now = time.time()
        timings[name] = round(now - t, 3)
        t = now
        following = order.index(name) + 1
        if following < len(order):
            watchdog.enter(order[following])
        else:
            watchdog.check()
            watchdog.stop()

    watchdog.enter("stage")
    try:
        return _run_stages(spark, inputs, policy, all_pairs, classifier, tick, timings)
    except Exception:
        watchdog.check()  # a stage cancelled by its deadline: that, not Spark's cancellation error
        raise
    finally:
        watchdog.stop()


def _run_stages(
    spark: Any,
    inputs: list[RunInput],
    policy: Policy,
    all_pairs: bool,
    classifier: Any,
    tick: Any,
    timings: dict[str, float],
) -> list[dict[str, Any]]:
    from pyspark import StorageLevel

    from spark_analysis.session import SMALL_INPUT_BYTES

    small = _log_bytes([i.run_dir for i in inputs]) < SMALL_INPUT_BYTES
    previous: dict[str, Any] = {}

    def configure(conf: dict[str, str]) -> None:
        for k, v in conf.items():
            previous.setdefault(k, spark.conf.get(k, None))
            spark.conf.set(k, v)

    scratch: Path | None = None
    shown = None
    try:
        configure(INTERPRETED if small else {})  # the staging's plans too
        sources = stage(
            spark, [i.run_dir for i in inputs], run_ids=[run_id_from_json(i.run_json) for i in inputs]
        )
        tick("stage")
        partitions = _shuffle_partitions(sources)
        configure(job_conf(partitions, small))
        with read_staged(spark, sources) as ev:
            facts = read_facts(ev, sources, inputs, policy)
            tick("facts")
            # one write, partitioned by run; each partition later moves into its run folder
            analysis0 = inputs[0].run_dir / "analysis"
            analysis0.mkdir(parents=True, exist_ok=True)
            scratch = Path(tempfile.mkdtemp(prefix=".reconcile-", dir=analysis0))
            if classifier is None:
                classifier = classify_wide if wide_enough(facts) else classify
            coded = write_pairs(spark, ev, facts, policy, scratch / "pairs", classifier)
            tick("messages")
            # what users read (docs/reconciliation.md): the few pairs that are not plain deliveries
            shown = listed(coded).persist(StorageLevel.MEMORY_AND_DISK)
            shown_named = named(spark, shown, facts, hashes=True)
            got = aggregates(
                spark, ev, named(spark, coded, facts, hashes=True), shown_named, inputs, facts, policy
            )
            tick("aggregates")
        out = named(spark, coded if all_pairs else shown, facts)
        write_by_run(out, len(inputs), scratch / "messages", every_run=not all_pairs)
        tick("output")
        engine = {
            "spark": spark.version,
            "master": master_of(spark),
            "shuffle_partitions": partitions,
            "runs_in_job": len(inputs),
            "pairs": "wide" if classifier is classify_wide else "rows",
            "messages_parquet": "all" if all_pairs else "listed",
            "timings_s": dict(timings),
        }
        summaries = assemble(got, inputs, facts, policy, engine)
        _write_outputs(inputs, summaries, scratch / "messages")
    finally:
        if shown is not None:
            shown.unpersist()
        for k, v in previous.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return summaries


def _write_outputs(inputs: list[RunInput], summaries: list[dict[str, Any]], messages_path: Path) -> None:
    for rk, (inp, summary) in enumerate(zip(inputs, summaries, strict=True)):
        analysis = inp.run_dir / "analysis"
        analysis.mkdir(parents=True, exist_ok=True)
        target = analysis / "messages.parquet"
        produced = messages_path / f"rk={rk}"
        if not produced.is_dir():
            produced.mkdir(parents=True)
        old = analysis / f".messages.parquet.old-{os.getpid()}"
        if target.exists():
            target.rename(old)
        shutil.move(str(produced), str(target))
        shutil.rmtree(old, ignore_errors=True)
        _write_text(analysis / "summary.json", json.dumps(summary, indent=2, default=str) + "\n")
        _write_text(analysis / "report.md", render_reconciliation_md(summary))


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


# --------------------------------------------------------------------------------------------
# public API and command line
# --------------------------------------------------------------------------------------------


def reconcile(
    run_dirs: list[Path],
    *,
    policy: Policy | None = None,
    master: str | None = None,
    spark: Any = None,
    all_pairs: bool = False,
) -> list[dict[str, Any]]:
    """Reconcile the runs in one Spark job; write each run's analysis/ files; return the summaries.
    ``all_pairs``: messages.parquet holds every pair, not only the listed ones (slower at scale)."""
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
    inputs = load_inputs(dirs)  # bad input is refused before a JVM starts
    if spark is None:
        from spark_analysis.session import SMALL_INPUT_BYTES, get_spark

        spark = get_spark(master, small=_log_bytes(dirs) < SMALL_INPUT_BYTES)
    return run_job(spark, inputs, policy or Policy(), all_pairs)


#: staged Parquet is about 25 times smaller than the JSON lines it holds (1M messages: 42 MB, 1.09 GB)
STAGED_TO_JSON = 25


def _log_bytes(dirs: list[Path]) -> int:
    """The runs' message logs' size, or what their staged Parquet stood for when it is larger (a
    run staged straight to Parquet, like the benchmark's, has no JSON lines)."""
    total = 0
    for d in dirs:
        logs = sum(f.stat().st_size for f in d.glob("agents/**/*") if f.is_file())
        staged = sum(f.stat().st_size for f in d.glob("analysis/events.parquet/**/*.parquet"))
        total += max(logs, staged * STAGED_TO_JSON)
    return total


class _ArgError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one clear line instead of usage + message
        raise _ArgError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="bfh reconcile", description="Reconcile broker-failover run folders.")
    p.add_argument("run_dirs", nargs="*", metavar="RUN_DIR", help="run folder(s)")
    p.add_argument("--run-dir", action="append", default=[], dest="run_dir_opts", metavar="DIR")
    p.add_argument("--master", default=None, help="Spark master URL (default local[2])")
    p.add_argument("--policy", default=None, help="verdict policy file (JSON or YAML)")
    p.add_argument(
        "--settle-s", type=float, default=None, help="seconds after a fault still attributed to it"
    )
    p.add_argument("--max-duplicates", type=int, default=None, help="duplicated deliveries tolerated")
    p.add_argument(
        "--all-pairs",
        action="store_true",
        help="messages.parquet holds every (message, subscription) pair, not only the anomalous ones",
    )
    p.add_argument("--quiet", action="store_true", help="no per-run line on stdout")
    return p


def run_dirs(argv: list[str]) -> list[Path]:
    """The run folders a command line names (for callers that judge them afterwards)."""
    try:
        args = _parser().parse_args(argv)
    except _ArgError:
        return []
    return [Path(d) for d in [*args.run_dirs, *args.run_dir_opts]]


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
        summaries = reconcile(dirs, policy=policy, master=args.master, all_pairs=args.all_pairs)
    except (_ArgError, InputError, PolicyError, DeadlineError) as exc:
        print(f"reconcile: error: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        for s in summaries:
            anomalies = ", ".join(s["examples"]) or "-"
            print(
                f"{s['run']}: reconciled (attempted={s['totals']['attempted']} "
                f"expected={s['deliveries']['expected']} ok={s['deliveries']['ok']}) "
                f"anomaly kinds: {anomalies} "
                f"-> {s['run_dir']}/analysis/summary.json"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
