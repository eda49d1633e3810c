"""`bfh up` / `bfh down` / `bfh status`: a topology held up for manual poking.

`bfh up` starts this module as a detached process (its own session, so the shell's Ctrl-C does not
reach it); the process holds `Environment.up` and keeps `reports/.up.json` current (client URLs,
proxy names, which broker is master). SIGTERM leaves the `with` block, which stops everything.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from harness import procs

STATE_NAME = ".up.json"


class UpError(RuntimeError):
    pass


def state_path(reports: Path) -> Path:
    return Path(reports) / STATE_NAME


def _alive(pid: int) -> bool:
    return procs.alive(pid)


def read_state(reports: Path) -> dict[str, Any] | None:
    p = state_path(reports)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    data["alive"] = _alive(int(data.get("pid", 0) or 0)) if data.get("pid") else False
    return data if isinstance(data, dict) else None


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
    tmp.replace(path)  # readers never see half a file


def serve(
    topology_ref: str,
    reports: Path,
    backend: str,
    env_up: Callable[..., AbstractContextManager[Any]] | None = None,
    stop_event: threading.Event | None = None,
    interval: float = 2.0,
) -> int:
    """The supervisor process body: hold `env_up(topology, run_dir, run_id, backend=...)` (default
    `Environment.up`) and keep the state file current until SIGTERM/SIGINT (or `stop_event`, for
    tests that run it in a thread with a fake environment)."""
    from harness.run.env import Environment, new_run_dir
    from harness.topology import load_topology

    env_up = env_up or Environment.up
    stopping = stop_event or threading.Event()
    if stop_event is None:  # the process: signals end it

        def _term(signum: int, frame: Any) -> None:
            stopping.set()

        signal.signal(signal.SIGTERM, _term)
        signal.signal(signal.SIGINT, _term)
    path = state_path(reports)
    topology = load_topology(topology_ref)
    run_id, run_dir = new_run_dir(reports, "up")
    base = {"pid": os.getpid(), "topology": topology.name, "run_dir": str(run_dir), "backend": backend}
    _write(path, {**base, "status": "starting"})
    try:
        with env_up(topology, run_dir, run_id, backend=backend) as env:
            urls = {
                g.name: {c: env.plan.client_urls(c, g.name) for c in g.connectors} for g in topology.groups
            }
            proxies = [lk.name for lk in env.plan.links]
            while not stopping.is_set():
                masters = {g.name: env.backend.master(g.name) for g in topology.groups}
                states = {b: env.backend.state(b) for b in env.plan.brokers}
                _write(
                    path,
                    {
                        **base,
                        "status": "up",
                        "client_urls": urls,
                        "proxies": proxies,
                        "fault_proxy": env.fault_proxy.url,
                        "masters": masters,
                        "brokers": states,
                        "updated": time.time(),
                    },
                )
                stopping.wait(interval)
    except Exception as e:  # noqa: BLE001 - reported to `bfh up` through the state file
        _write(path, {**base, "status": "failed", "error": str(e).splitlines()[0] if str(e) else repr(e)})
        return 2
    _write(path, {**base, "status": "down"})
    return 0


def up(topology_ref: str, reports: Path, backend: str = "local", timeout: float = 180.0) -> dict[str, Any]:
    """Start the supervisor and wait until the topology serves; raise UpError if it cannot."""
    reports = Path(reports)
    reports.mkdir(parents=True, exist_ok=True)
    current = read_state(reports)
    if current and current.get("alive"):
        raise UpError(
            f"a topology is already up (pid {current['pid']}, {current.get('topology')}); `bfh down` first"
        )
    state_path(reports).unlink(missing_ok=True)
    log = reports / ".up.log"
    with log.open("w") as out:
        proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [
                sys.executable,
                "-m",
                "harness.cli.supervisor",
                topology_ref,
                "--reports",
                str(reports),
                "--backend",
                backend,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = read_state(reports)
        if st and st.get("status") == "up":
            return st
        if st and st.get("status") == "failed":
            proc.wait(timeout=60)
            raise UpError(str(st.get("error")))
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise UpError(f"the supervisor exited ({proc.returncode}): {tail[0]}")
        time.sleep(0.3)
    proc.terminate()
    proc.wait(timeout=60)
    raise UpError(f"the topology was not up within {timeout:.0f}s (log: {log})")


def down(reports: Path, timeout: float = 60.0) -> dict[str, Any] | None:
    """Stop the supervisor (SIGTERM; it stops everything it started). None when nothing is up."""
    st = read_state(reports)
    if not st:
        return None
    pid = int(st.get("pid", 0) or 0)
    if pid and st.get("alive"):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.2)
        if _alive(pid):
            raise UpError(f"supervisor pid {pid} did not stop within {timeout:.0f}s")
    state_path(reports).unlink(missing_ok=True)
    return st


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.cli.supervisor")
    p.add_argument("topology")
    p.add_argument("--reports", default="reports")
    p.add_argument("--backend", default="local")
    a = p.parse_args(argv)
    return serve(a.topology, Path(a.reports), a.backend)


if __name__ == "__main__":
    sys.exit(main())
