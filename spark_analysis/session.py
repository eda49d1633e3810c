"""The one place that builds the SparkSession used by the reconciliation jobs.

Fast start and a small footprint: ``local[2]`` by default, no UI, few shuffle partitions,
quiet logs. Environment overrides (all optional):

- ``BFH_SPARK_MASTER``: master URL when none is passed (default ``local[2]``)
- ``BFH_SPARK_DRIVER_MEMORY``: driver memory (default ``2g``); in local mode the driver is
  also the executor, so this bounds the whole job
- ``BFH_SPARK_SHUFFLE_PARTITIONS``: default shuffle partitions (default 4)
- ``BFH_SPARK_REMOTE``: an ``sc://host:port`` Spark Connect server to use instead of a local JVM
- ``BFH_SPARK_CONNECT_OWNER``: a pid; use that process's shared Connect server
  (`spark_analysis.server`), starting it if needed; set by the pytest plugin on xdist workers
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

DEFAULT_MASTER = "local[2]"
DEFAULT_DRIVER_MEMORY = "2g"
DEFAULT_SHUFFLE_PARTITIONS = 4

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
) -> Any:
    """Return a SparkSession (reusing an active one, e.g. under spark-submit)."""
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
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": driver_memory,
        "spark.driver.extraJavaOptions": log_opts,
        "spark.executor.extraJavaOptions": log_opts,
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.ansi.enabled": "false",
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
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _remote_url() -> str | None:
    url = os.environ.get("BFH_SPARK_REMOTE")
    owner = os.environ.get("BFH_SPARK_CONNECT_OWNER")
    if not url and owner:
        from spark_analysis.server import shared_url

        url = os.environ["BFH_SPARK_REMOTE"] = shared_url(int(owner))
    return url or None


def _remote(url: str, shuffle_partitions: int) -> Any:
    # gRPC's fork handlers restart its poller in every forked child, which can abort a child forked
    # to exec a broker (grpc/grpc#43055); this process forks often and never uses gRPC in a child.
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.remote(url)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .getOrCreate()
    )


def master_of(spark: Any) -> str:
    """The master URL a session runs on (a Connect session has no SparkContext to ask)."""
    try:
        return str(spark.sparkContext.master)
    except Exception:  # noqa: BLE001 - pyspark raises its own error types for Connect sessions
        return str(spark.conf.get("spark.master", "remote"))
