"""A Spark session made ready in the background while a run's brokers and traffic go: a cold
session and its first reconcile cost 10-15 s that the run's own reconcile would otherwise wait
out (`bfh validate`, `bfh run`, a pytest worker without the shared server)."""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from pathlib import Path

_lock = threading.Lock()
_warmed = False
last_error: str | None = None  # what went wrong in the last warm-up (it never raises)


def warm_up(small: bool = True) -> bool:
    """Start the session and reconcile a tiny run on it: classes loaded, plans compiled. Once per
    process; on a shared or remote server only connect (the server warms itself). Never raises:
    the real reconcile reports a broken Spark with its own error. True when Spark is warm."""
    global _warmed, last_error
    from spark_analysis.session import get_spark

    with _lock:
        if _warmed:
            return True
        try:
            spark = get_spark(small=small)
            if not os.environ.get("BFH_SPARK_REMOTE"):
                from spark_analysis.reconcile import reconcile
                from spark_analysis.testing.synth import tiny_history

                with tempfile.TemporaryDirectory(prefix="bfh-warmup-") as tmp:
                    reconcile([tiny_history(Path(tmp) / "warmup")], spark=spark)
        except Exception as e:  # noqa: BLE001 - reported by the real reconcile
            last_error = f"{type(e).__name__}: {e}"
            return False
        _warmed = True
        return True


def import_here() -> None:
    """Import the Python modules the warm-up loads, on the caller's thread, before a warm-up thread
    starts: while a thread imports a module, other threads see it half-initialised in sys.modules,
    and code that reads it from there breaks (Hypothesis's `sampled_from` read `numpy.ndarray`
    from a half-imported numpy: a failed gate round). gRPC is not imported here: it must load
    after session.py has set its fork setting."""
    import numpy  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
    import pyspark.sql  # noqa: F401


#: the warm-up thread's nice value, inherited by the Spark JVM it starts: the warm-up runs while the
#: brokers fail over, and on two cores its JVM start took half a core from a 100-agent fleet's
#: failover (acks late past the bound); the run's own processes come first.
#: ``BFH_WARMUP_NICE`` sets another (0: none).
NICE = 10


def nice() -> int:
    try:
        return max(0, min(19, int(os.environ.get("BFH_WARMUP_NICE") or NICE)))
    except ValueError:
        return NICE


def _warm_up_niced(small: bool) -> None:
    # Linux: this thread only; the JVM it forks inherits it (lowering needs no privilege)
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice())
    warm_up(small)


def unnice() -> bool:
    """Give the warm-up's JVM (every one of its threads) the caller's nice again, once the run's
    brokers and agents are done: a JVM left at nice 10 beside a CPU hog reconciled a scenario run
    in minutes instead of seconds (issue 60). Lowering a nice value needs CAP_SYS_NICE; without
    it the JVM keeps its nice. True when every thread was set (or there was nothing to set)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is None:  # no local JVM (a shared or remote server)
        return True
    target = os.getpriority(os.PRIO_PROCESS, 0)
    ok = True
    for pid in _jvm_pids(proc.pid):
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                if os.getpriority(os.PRIO_PROCESS, int(task.name)) != target:
                    os.setpriority(os.PRIO_PROCESS, int(task.name), target)
            except (OSError, ValueError):
                ok = False
    return ok


def _jvm_pids(pid: int) -> list[int]:
    """The launcher (spark-submit's shell) and the java process under it."""
    import psutil

    try:
        root = psutil.Process(pid)
        return [pid, *(c.pid for c in root.children(recursive=True))]
    except psutil.Error:
        return []


def start(small: bool = True) -> threading.Thread:
    """`warm_up` on a daemon thread at a lower priority; join it before the reconcile that should
    find Spark warm."""
    import_here()
    t = threading.Thread(target=_warm_up_niced, args=(small,), name="spark-warmup", daemon=True)
    t.start()
    return t
