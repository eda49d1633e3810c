"""The shared Spark Connect server's process (spark_analysis.shared_server starts and stops it).

python -m spark_analysis.testing.server --port PORT --owner PID [--ready FILE]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from spark_analysis.reconcile import reconcile
from spark_analysis.session import get_spark
from spark_analysis.shared_server import alive
from spark_analysis.testing.synth import tiny_history

PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"


def serve(port: int, owner: int, ready: Path | None = None) -> None:
    """Run a local Spark session with the Connect plugin on `port` until `owner` dies or SIGTERM."""
    stopping = False

    def _term(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _term)
    for key in ("BFH_SPARK_REMOTE", "BFH_SPARK_CONNECT_OWNER"):  # the server, not a client
        os.environ.pop(key, None)
    # A long-lived server for test-sized runs: get_spark's `small` JVM (C1 alone: C2's compiler
    # thread was a third of the server's CPU, and CPU is what the workers' brokers wait for; 22
    # catalog runs on 4 workers: the server's CPU 142 -> 101 s, same wall time), room for four
    # workers' runs at once, a bounded history of finished queries (Spark keeps 1,000 plans by
    # default, the UI off or not), and a clean exit instead of a half-dead JVM on OOM.
    spark = get_spark(
        app="bfh-connect",
        driver_memory=os.environ.get("BFH_SPARK_DRIVER_MEMORY") or "3g",
        small=True,
        jvm_opts="-XX:+ExitOnOutOfMemoryError",
        extra_conf={
            "spark.plugins": PLUGIN,
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(port),
            "spark.connect.grpc.port.maxRetries": "0",
            "spark.sql.ui.retainedExecutions": "50",
            "spark.ui.retainedJobs": "100",
            "spark.ui.retainedStages": "100",
            "spark.ui.retainedTasks": "5000",
        },
    )
    _warm_up(spark)
    if ready is not None:
        ready.touch()
    jvm = spark.sparkContext._gateway.proc  # the JVM's launcher: gone when the JVM is
    try:
        while not stopping and alive(owner):
            if jvm.poll() is not None:  # clients then find no server and start a new one
                print(
                    f"spark_analysis.testing.server: the JVM exited ({jvm.returncode})",
                    file=sys.stderr,
                    flush=True,
                )
                os._exit(1)
            time.sleep(1.0)
    finally:
        spark.stop()


def _warm_up(spark: object) -> None:
    """Reconcile a tiny run once, so the first client's reconcile finds the classes loaded and the
    plans' code compiled (the JVM caches both for every session)."""
    with tempfile.TemporaryDirectory(prefix="bfh-warmup-") as tmp:
        try:
            reconcile([tiny_history(Path(tmp) / "warmup")], spark=spark)
        except Exception as exc:  # noqa: BLE001 - a client's own reconcile will report it properly
            print(f"spark_analysis.testing.server: warm-up failed: {exc}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="spark_analysis.testing.server", description=__doc__)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--owner", type=int, required=True, help="pid whose death stops the server")
    p.add_argument("--ready", type=Path, default=None, help="file to create once clients can connect")
    args = p.parse_args(argv)
    serve(args.port, args.owner, args.ready)
    return 0


if __name__ == "__main__":
    sys.exit(main())
