"""The one place that builds the SparkSession used by the reconciliation jobs.

Fast start and a small footprint: ``local[2]`` by default, no UI, few shuffle partitions,
quiet logs. Environment overrides (all optional):

- ``BFH_SPARK_MASTER``: master URL when none is passed (default ``local[2]``)
- ``BFH_SPARK_DRIVER_MEMORY``: driver memory (default ``2g``); in local mode the driver is
  also the executor, so this bounds the whole job
- ``BFH_SPARK_SHUFFLE_PARTITIONS``: default shuffle partitions (default 4)
- ``BFH_SPARK_REMOTE``: an ``sc://host:port`` Spark Connect server to use instead of a local JVM
- ``BFH_SPARK_CONNECT_OWNER``: a pid; use that process's shared Connect server
  (`spark_analysis.shared_server`), starting it if needed; set by the pytest plugin on xdist workers
- ``BFH_SPARK_CDS=0``: start local JVMs without Spark's class archive (spark_analysis.classarchive)
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from spark_analysis import classarchive

DEFAULT_MASTER = "local[2]"
DEFAULT_DRIVER_MEMORY = "2g"
DEFAULT_SHUFFLE_PARTITIONS = 4
# C1 alone gets a 48 MB code cache by default: in 2 of 5 sessions of 12-30 reconciles it filled up,
# the JVM stopped compiling and warm reconciles slowed by 1.5x (quiet) to 3x (under load).
SMALL_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m"
# Message logs below this size reconcile on a `small` session (about 200,000 records).
SMALL_INPUT_BYTES = 64 << 20

_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
"""


def _log4j2_file() -> Path:
    path = Path(tempfile.gettempdir()) / f"bfh-spark-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _LOG4J2:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J2)
        tmp.replace(path)
    return path


def get_spark(
    master: str | None = None,
    app: str = "bfh-reconcile",
    *,
    driver_memory: str | None = None,
    shuffle_partitions: int | None = None,
    extra_conf: dict[str, str] | None = None,
    small: bool = False,
    jvm_opts: str = "",
) -> Any:
    """Return a SparkSession (reusing an active one, e.g. under spark-submit).

    `small`: the session will only reconcile scenario-sized runs, so its JVM compiles with C1
    alone: half the CPU of a cold start and first reconcile (22.6 -> 11.4 CPU-s measured), at a
    cost only large inputs would notice. `jvm_opts`: more options for the driver's JVM."""
    from pyspark.sql import SparkSession

    if shuffle_partitions is None:
        shuffle_partitions = int(os.environ.get("BFH_SPARK_SHUFFLE_PARTITIONS") or DEFAULT_SHUFFLE_PARTITIONS)
    # under spark-submit the job runs where it was submitted, never on a shared server
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ and (url := _remote_url()):
        return _remote(url, shuffle_partitions)
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    # under spark-submit the JVM already exists with the submitter's master and memory settings
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    if master is None and not under_submit:
        master = os.environ.get("BFH_SPARK_MASTER") or DEFAULT_MASTER
    driver_memory = driver_memory or os.environ.get("BFH_SPARK_DRIVER_MEMORY") or DEFAULT_DRIVER_MEMORY
    # Executors (standalone cluster) run the same interpreter as the driver.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    log_opts = f"-Dlog4j2.configurationFile=file:{_log4j2_file()}"
    cds = "" if under_submit else classarchive.jvm_opts()
    driver_opts = " ".join(o for o in (log_opts, SMALL_JVM_OPTS if small else "", cds, jvm_opts) if o)
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": driver_memory,
        "spark.driver.extraJavaOptions": driver_opts,
        "spark.executor.extraJavaOptions": log_opts,
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.ansi.enabled": "false",
        # PySpark 4 records the Python call site of every DataFrame and Column call for error
        # messages: five py4j round trips each, 60 % of a local reconcile's 12,100
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        "spark.sql.adaptive.enabled": "true",
        # A reconcile compiles a few hundred generated classes; the default cache (100) evicts them
        # within one job, so every run paid Janino and the JIT again (35% of a warm reconcile's CPU).
        "spark.sql.codegen.cache.maxEntries": "2000",
        # Lets joins on (run, msg_id, subscription) reuse the (run, msg_id) partitioning.
        "spark.sql.requireAllClusterKeysForCoPartition": "false",
        "spark.sql.sources.partitionOverwriteMode": "static",
        "spark.sql.parquet.compression.codec": "snappy",
        # the staged runs are opened as (external, temporary) catalog tables: keep Spark's default
        # database folder out of the working directory
        "spark.sql.warehouse.dir": str(Path(tempfile.gettempdir()) / f"bfh-spark-warehouse-{os.getuid()}"),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }
    conf.update(extra_conf or {})
    if under_submit:
        conf.pop("spark.driver.memory")
    builder = SparkSession.builder.appName(app)
    if master is not None:
        builder = builder.master(master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    if not under_submit:
        _launch_jvm({**conf, **({"spark.master": master} if master else {}), "spark.app.name": app})
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _launch_jvm(conf: dict[str, str]) -> None:
    """Start the driver's JVM (unless one runs) with its output in a log file: its start-up
    banners ("Using incubator modules", the log-level hint) stay out of the user's terminal. Only
    the JVM's own stderr goes there: this process's stderr is never redirected (a warm-up thread
    starting the JVM while the run reports an error would hide the error). On a failed start the
    file's tail is shown."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    log = Path(tempfile.gettempdir()) / f"bfh-spark-{os.getuid()}" / f"jvm-{os.getpid()}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    spark_conf = SparkConf(loadDefaults=False).setAll(list(conf.items()))
    before = _children()
    with log.open("ab") as out:
        try:
            gateway = launch_gateway(spark_conf, popen_kwargs={"stdout": out, "stderr": out})
        except BaseException as e:
            _kill_new_children(before)  # an interrupted start leaves no JVM behind
            if isinstance(e, Exception):  # an interrupt is reported by the caller, in one line
                sys.stderr.write(f"Spark did not start; its JVM's output ({log}):\n")
                sys.stderr.write(log.read_text(errors="replace")[-3000:])
            raise
    SparkContext._ensure_initialized(gateway=gateway)


def _children() -> set[int]:
    import psutil

    return {c.pid for c in psutil.Process().children(recursive=True)}


def _kill_new_children(before: set[int]) -> None:
    import psutil

    for c in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            # only Spark's launcher and JVM: other threads may be starting brokers and agents
            if c.pid not in before and any("spark" in a.lower() for a in c.cmdline()[:8]):
                c.kill()


def _remote_url() -> str | None:
    owner = os.environ.get("BFH_SPARK_CONNECT_OWNER")
    if owner:
        from spark_analysis.shared_server import shared_url

        # asked on every call (a few ms): a server that died is started again instead of leaving
        # every later reconcile of the session to fail
        os.environ["BFH_SPARK_REMOTE"] = shared_url(int(owner))
    return os.environ.get("BFH_SPARK_REMOTE") or None


_remote_sessions: dict[str, Any] = {}
_remote_lock = threading.Lock()  # the warm-up thread and the caller may connect at once


def _remote(url: str, shuffle_partitions: int) -> Any:
    # gRPC's fork handlers restart its poller in every forked child, which can abort a child forked
    # to exec a broker (grpc/grpc#43055); this process forks often and never uses gRPC in a child.
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import DefaultPolicy

    with _remote_lock:
        spark = _remote_sessions.get(url)
        if spark is None:
            for old in _remote_sessions.values():  # a server that was replaced
                with contextlib.suppress(Exception):
                    old.stop()
            _remote_sessions.clear()
            spark = _remote_sessions[url] = SparkSession.builder.remote(url).create()
            # Connect's default retries wait out ten minutes for a server that is gone, turning one dead
            # server into a hang of every later reconcile: give up after about 5 s instead
            policy = DefaultPolicy(
                max_retries=5, initial_backoff=100, max_backoff=2000, backoff_multiplier=4.0
            )
            spark.client.set_retry_policies([policy])
    spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))
    return spark


def master_of(spark: Any) -> str:
    """The master URL a session runs on (a Connect session has no SparkContext to ask)."""
    try:
        return str(spark.sparkContext.master)
    except Exception:  # noqa: BLE001 - pyspark raises its own error types for Connect sessions
        return str(spark.conf.get("spark.master", "remote"))
