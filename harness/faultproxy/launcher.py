"""Start (or find) the fault proxy for a run.

Choice, first match wins:
1. `TOXIPROXY_URL` is set: use that server (a real Toxiproxy, e.g. the Compose service), start
   nothing, and `reset()` it;
2. `toxiproxy-server` is on PATH: spawn it on a free port (`kind == "toxiproxy-server"`);
3. otherwise spawn the builtin server, `python -m harness.faultproxy` (`kind == "builtin"`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
import time
from pathlib import Path
from types import TracebackType

from harness import procs
from harness.faultproxy.client import ToxiproxyClient, ToxiproxyError

READY_TIMEOUT = 20.0


class FaultProxyError(RuntimeError):
    pass


class FaultProxyHandle:
    def __init__(self, url: str, kind: str, proc: procs.ManagedProcess | None = None) -> None:
        self.url = url
        self.kind = kind
        self.proc = proc
        self.client = ToxiproxyClient(url)

    def __repr__(self) -> str:
        return f"FaultProxyHandle(url={self.url!r}, kind={self.kind!r})"

    def stop(self) -> None:
        """Stop the server we started; for an external one, remove what this run left (reset)."""
        if self.proc is not None:
            self.proc.terminate(timeout=10)
            self.proc = None
        elif self.kind == "external":
            with contextlib.suppress(ToxiproxyError):
                self.client.reset()

    def __enter__(self) -> FaultProxyHandle:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def start_fault_proxy(run_dir: Path, seed: int | None = None) -> FaultProxyHandle:
    run_dir = Path(run_dir)
    url = os.environ.get("TOXIPROXY_URL", "").strip()
    if url:
        handle = FaultProxyHandle(url, "external")
        try:
            handle.client.wait_ready(READY_TIMEOUT)
            handle.client.reset()
        except ToxiproxyError as exc:
            raise FaultProxyError(f"TOXIPROXY_URL={url}: {exc}") from None
        return handle

    binary = shutil.which("toxiproxy-server")
    last_error = ""
    for _attempt in range(3):  # a free port can be taken between probe and bind: retry
        port = free_port()
        if binary:
            kind = "toxiproxy-server"
            cmd = [binary, "-host", "127.0.0.1", "-port", str(port)]
            if seed is not None:
                cmd += ["-seed", str(seed)]
        else:
            kind = "builtin"
            cmd = [sys.executable, "-m", "harness.faultproxy", "--host", "127.0.0.1", "--port", str(port)]
            if seed is not None:
                cmd += ["--seed", str(seed)]
        proc = procs.spawn(
            name="fault-proxy", cmd=cmd, log_path=run_dir / "fault-proxy.log", pid_dir=run_dir / "pids"
        )
        handle = FaultProxyHandle(f"http://127.0.0.1:{port}", kind, proc)
        try:
            _wait_up(handle, proc)
            return handle
        except FaultProxyError as exc:
            last_error = str(exc)
            proc.terminate(timeout=5)
            if "address already in use" not in last_error.lower():
                raise
    raise FaultProxyError(last_error)


def _wait_up(handle: FaultProxyHandle, proc: procs.ManagedProcess) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        if not proc.alive():
            raise FaultProxyError(
                f"fault proxy ({handle.kind}) exited with code {proc.popen.returncode} before answering "
                f"on {handle.url}; log {proc.log_path}:\n{proc.log_tail(20)}"
            )
        try:
            handle.client.version()
            return
        except ToxiproxyError as exc:
            if exc.status != 0:
                return  # it answers, even if oddly
        if time.monotonic() >= deadline:
            raise FaultProxyError(
                f"fault proxy ({handle.kind}) did not answer on {handle.url} within {READY_TIMEOUT:.0f} s; "
                f"log {proc.log_path}:\n{proc.log_tail(20)}"
            )
        time.sleep(0.05)
