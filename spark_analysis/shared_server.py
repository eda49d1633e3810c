"""One Spark Connect server shared by several processes (the pytest-xdist workers of one session).

Each worker holding its own local Spark JVM pays a cold start of tens of seconds and competes for
the two cores with the brokers under test; one shared server pays it once. The server belongs to
an *owner* process (the pytest controller): it is started by the first process that asks for it,
and it stops when the owner calls `stop(owner)` or dies.

    python -m spark_analysis.testing.server --port PORT --owner PID    # what `shared_url` starts

This module is the clients' side (start or join, stop): spark_analysis.session joins the server of
the owner named in ``BFH_SPARK_CONNECT_OWNER``. It imports nothing of spark_analysis; the server
process, which warms itself up on a synthetic run, is test infrastructure
(spark_analysis.testing.server), started by module name.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

START_TIMEOUT_S = 180.0
_CLIENT_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_API_MODE")


def _state_path(owner: int) -> Path:
    return Path(tempfile.gettempdir()) / f"bfh-spark-connect-{os.getuid()}-{owner}.json"


@contextlib.contextmanager
def _locked(owner: int) -> Iterator[Path]:
    state = _state_path(owner)
    with open(state.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield state


def alive(pid: int) -> bool:
    try:  # a zombie is dead: its parent just has not reaped it yet
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def shared_url(owner: int) -> str:
    """The `sc://` URL of `owner`'s server, starting the server if no live one is recorded."""
    with _locked(owner) as state:
        log, ready = state.with_suffix(".log"), state.with_suffix(".ready")
        with contextlib.suppress(OSError, ValueError, KeyError):
            rec = json.loads(state.read_text())
            if alive(int(rec["pid"])) and _listening(int(rec["port"])):
                return f"sc://127.0.0.1:{rec['port']}"
            tail = log.read_text(errors="replace")[-1500:]
            print(
                f"spark_analysis.shared_server: server {rec['pid']} is gone; starting another."
                f" Its log ended:\n{tail}",
                file=sys.stderr,
                flush=True,
            )
        port = _free_port()
        ready.unlink(missing_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "spark_analysis.testing.server",
            "--port",
            str(port),
            "--owner",
            str(owner),
        ]
        # a Connect client in this process marks the environment as Connect mode (pyspark sets
        # SPARK_CONNECT_MODE_ENABLED): the server must build a classic session
        env = {k: v for k, v in os.environ.items() if k not in _CLIENT_ENV}
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [*cmd, "--ready", str(ready)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # outlives the worker that started it; the owner ends it
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        # the port opens while the server's session is still being built: wait for the server's word
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                tail = log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"Spark Connect server did not start on port {port} (log {log}):\n{tail}")
            time.sleep(0.25)
        state.write_text(json.dumps({"pid": proc.pid, "port": port}))
        return f"sc://127.0.0.1:{port}"


def stop(owner: int, timeout: float = 20.0) -> None:
    """Stop `owner`'s server, if one was started, and forget it."""
    with _locked(owner) as state:
        try:
            pid = int(json.loads(state.read_text())["pid"])
        except (OSError, ValueError, KeyError):
            pid = 0
        if pid and alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)  # the server and its JVM lead one process group
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).wait(timeout)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        for p in (state, state.with_suffix(".log"), state.with_suffix(".ready")):
            p.unlink(missing_ok=True)
    _state_path(owner).with_suffix(".lock").unlink(missing_ok=True)
