"""The shared Spark Connect server: one per owner, reused, reconciles like a local session, and
never outlives its owner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from spark_analysis import shared_server as server
from spark_analysis.testing.synth import History, Msg, Sub, tiny_history

pytestmark = [pytest.mark.spark, pytest.mark.extended]


def _server_pid(owner: int) -> int:
    return int(json.loads(server._state_path(owner).read_text())["pid"])


def _gone(pid: int, timeout: float) -> bool:
    try:
        psutil.Process(pid).wait(timeout)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        return False
    return True


def test_shared_server_reconciles_and_stops_with_its_owner(tmp_path: Path) -> None:
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        url = server.shared_url(owner.pid)
        assert url == server.shared_url(owner.pid)  # the second caller reuses the first one's server
        pid = _server_pid(owner.pid)

        # a client in another process (as an xdist worker is) reconciles through it
        t0 = time.time() - 30
        msgs = [
            Msg(f"m-{i}", "a", "t/x", 1, t0 + 1 + i, "acknowledged", receipts={0: [t0 + 1 + i + 0.1]})
            for i in range(5)
        ]
        msgs.append(Msg("m-lost", "a", "t/x", 1, t0 + 7, "acknowledged"))
        run_dir = History("srv", [Sub("a", "t/#", t0)], msgs).write(tmp_path / "run")
        env = dict(os.environ, BFH_SPARK_REMOTE=url)
        env.pop("BFH_SPARK_CONNECT_OWNER", None)
        out = subprocess.run(
            [sys.executable, "-m", "spark_analysis.reconcile", "--quiet", str(run_dir)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        summary = json.loads((run_dir / "analysis" / "summary.json").read_text())
        assert summary["deliveries"]["ok"] == 5
        assert summary["deliveries"]["lost"] == 1
        assert summary["engine"]["master"].startswith("local")

        owner.kill()  # the owner dies without a word: the server follows it
        assert _gone(pid, 30), "the Spark Connect server outlived its owner"
    finally:
        owner.kill()
        owner.wait()
        server.stop(owner.pid)
    assert not server._state_path(owner.pid).exists()


def test_stop_ends_the_server() -> None:
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        server.shared_url(holder.pid)
        pid = _server_pid(holder.pid)
        server.stop(holder.pid)  # the owner lives on: only stop() ends the server
        assert _gone(pid, 5)
        assert not server._state_path(holder.pid).exists()
        server.stop(holder.pid)  # nothing recorded any more: a no-op
    finally:
        holder.kill()
        holder.wait()


def test_a_dead_server_is_replaced_and_never_waited_out(tmp_path: Path) -> None:
    """The server's JVM dies mid-session (OOM, a crash): its process exits, the session's next
    reconcile starts a new server, and a client holding the dead one's address fails in seconds
    (Connect's own retries would wait out ten minutes)."""
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    run_dir = tiny_history(tmp_path / "run")
    reconcile_cmd = [sys.executable, "-m", "spark_analysis.reconcile", "--quiet", str(run_dir)]
    try:
        dead_url = server.shared_url(holder.pid)
        pid = _server_pid(holder.pid)
        jvm = next(p for p in psutil.Process(pid).children(recursive=True) if p.name() == "java")
        jvm.kill()
        assert _gone(pid, 30), "the server's process outlived its JVM"

        stale = dict(os.environ, BFH_SPARK_REMOTE=dead_url)
        stale.pop("BFH_SPARK_CONNECT_OWNER", None)
        t0 = time.monotonic()
        out = subprocess.run(reconcile_cmd, env=stale, capture_output=True, text=True, timeout=120)
        assert out.returncode != 0
        assert time.monotonic() - t0 < 60, "a client waited out the dead server's retries"

        env = dict(os.environ, BFH_SPARK_CONNECT_OWNER=str(holder.pid), BFH_SPARK_REMOTE=dead_url)
        out = subprocess.run(reconcile_cmd, env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        assert _server_pid(holder.pid) != pid
    finally:
        holder.kill()
        holder.wait()
        server.stop(holder.pid)
