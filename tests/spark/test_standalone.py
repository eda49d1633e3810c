"""The job under spark-submit on a real Spark standalone cluster (master + one worker on
localhost), started from the pyspark package's own launch classes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark
import pytest

from harness.verdict.checks.limits import anomalies
from spark_analysis.testing.synth import History, Msg, Sub

pytestmark = [pytest.mark.spark, pytest.mark.extended, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_DAEMON_MEMORY="256m",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_NO_DAEMONIZE="1",
    )
    # the job must run on the cluster started here, not on the test session's shared server
    drop = ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", "BFH_SPARK_REMOTE", "BFH_SPARK_CONNECT_OWNER")
    drop += ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")
    for key in drop:
        env.pop(key, None)
    return env


def _wait_for(log: Path, needle: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and needle in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    raise AssertionError(f"{needle!r} not seen in {log}:\n{log.read_text(errors='replace')[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)  # the group we created: the daemon and its executors
        proc.wait(timeout=20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("standalone")
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    procs = []
    try:
        master_log = tmp / "master.log"
        master = subprocess.Popen(
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(_free_port()),
            ],
            stdout=master_log.open("w"),
            stderr=subprocess.STDOUT,
            env=_env(),
            start_new_session=True,
        )
        procs.append(master)
        _wait_for(master_log, "I have been elected leader", master, 120)
        worker_log = tmp / "worker.log"
        worker = subprocess.Popen(
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                url,
                "--host",
                "127.0.0.1",
                "--cores",
                "2",
                "--memory",
                "1g",
                "--webui-port",
                str(_free_port()),
                "--work-dir",
                str(tmp / "work"),
            ],
            stdout=worker_log.open("w"),
            stderr=subprocess.STDOUT,
            env=_env(),
            start_new_session=True,
        )
        procs.append(worker)
        _wait_for(worker_log, "Successfully registered with master", worker, 120)
        yield url, tmp
    finally:
        for p in reversed(procs):
            _stop(p)


def test_spark_submit_on_standalone_cluster(cluster):
    url, tmp = cluster
    run = History(
        run="run-standalone",
        subs=[Sub("sub", "s/#", 0.5)],
        msgs=[
            Msg("a", "pub", "s/1", 1, 1.0, "acknowledged", receipts={0: [1.1]}),
            Msg("b", "pub", "s/2", 1, 2.0, "acknowledged"),
            Msg("c", "pub", "s/1", 1, 3.0, "acknowledged", receipts={0: [3.1, 3.2]}),
        ],
    ).write(tmp / "run-standalone")
    cmd = [
        str(SPARK_HOME / "bin" / "spark-submit"),
        "--master",
        url,
        "--conf",
        "spark.executor.memory=512m",
        "--conf",
        "spark.executor.cores=2",
        "--conf",
        "spark.ui.enabled=false",
        "--driver-memory",
        "1g",
        str(REPO / "spark_analysis" / "reconcile.py"),
        "--run-dir",
        str(run),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=600, cwd=tmp)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "run-standalone: reconciled" in done.stdout
    # Spark lists the kinds it counted; which of them break a limit is the verdict's (checks/limits.py)
    assert "anomaly kinds: duplicated, lost" in done.stdout
    summary = json.loads((run / "analysis" / "summary.json").read_text())
    assert summary["engine"]["master"] == url
    assert summary["deliveries"]["expected"] == 3
    assert (
        summary["deliveries"]["ok"],
        summary["deliveries"]["lost"],
        summary["deliveries"]["duplicated"],
    ) == (1, 1, 1)
    assert [r["kind"] for r in anomalies(summary)[0]] == ["lost"]
