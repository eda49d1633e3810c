"""Child processes of the harness: every broker, proxy and agent is started here.

No orphans, by three layers:
- each child gets PR_SET_PDEATHSIG=SIGKILL, so the kernel kills it when the harness dies,
  even by kill -9;
- each child leads its own process group, and `ManagedProcess.kill()` signals the whole group;
- each child's pid and command line are recorded in a `pids/` folder of its run, so a later
  harness can reap what a crashed one left (`reap_stale`), checking the command line first so an
  unrelated process that reused the pid is never touched.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)
_live: set[ManagedProcess] = set()
_live_lock = threading.Lock()
_spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bfh-spawner")


def _child_setup() -> None:
    # Runs in the child between fork and exec.
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    os.setpgid(0, 0)


class ManagedProcess:
    """A child process that the harness owns; `kill()`/`terminate()` reach its whole group."""

    def __init__(
        self, name: str, popen: subprocess.Popen[bytes], pidfile: Path | None, log_path: Path
    ) -> None:
        self.name = name
        self.popen = popen
        self.pid = popen.pid
        self.pidfile = pidfile
        self.log_path = log_path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL the process group and reap it."""
        self.signal(signal.SIGKILL)
        self.wait(10)
        self._forget()

    def terminate(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, wait up to `timeout`, then SIGKILL. Returns the exit code."""
        if self.alive():
            self.signal(signal.SIGCONT)  # a paused process cannot handle SIGTERM
            self.signal(signal.SIGTERM)
            if self.wait(timeout) is None:
                self.signal(signal.SIGKILL)
                self.wait(10)
        self._forget()
        return self.popen.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def _forget(self) -> None:
        with _live_lock:
            _live.discard(self)
        if self.pidfile is not None and not self.alive():
            self.pidfile.unlink(missing_ok=True)

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def spawn(
    name: str,
    cmd: Sequence[str],
    log_path: str | Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    pid_dir: str | Path | None = None,
) -> ManagedProcess:
    """Start `cmd` with stdout+stderr to `log_path`; record it in `pid_dir` for stale reaping."""
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    full_env = dict(os.environ)
    if env:
        full_env.update(env)

    def _popen() -> subprocess.Popen[bytes]:
        with log_path.open("ab") as log:
            return subprocess.Popen(
                list(cmd),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=full_env,
                cwd=str(cwd) if cwd else None,
                preexec_fn=_child_setup,  # prctl must run in the child
                close_fds=True,
            )

    # PDEATHSIG fires when the forking *thread* exits, so every fork happens on one thread that
    # lives as long as the harness, whichever thread asked (nemesis threads are short-lived).
    popen = _spawner.submit(_popen).result()
    pidfile = None
    if pid_dir is not None:
        pid_dir = Path(pid_dir)
        pid_dir.mkdir(parents=True, exist_ok=True)
        pidfile = pid_dir / f"{name}.{popen.pid}.json"
        pidfile.write_text(json.dumps({"pid": popen.pid, "name": name, "cmd": list(cmd), **_OWNER}))
    proc = ManagedProcess(name, popen, pidfile, log_path)
    with _live_lock:
        _live.add(proc)
    return proc


def terminate_all(procs: Sequence[ManagedProcess], timeout: float = 10.0) -> list[int | None]:
    """`terminate` for many at once: SIGTERM to all first, then wait for all with the same
    per-process deadline and the same SIGKILL fallback (one by one, 100 agents took 22 s).
    Returns the exit codes in the order of `procs` (one process may stand for several: packed
    fleet members share theirs)."""
    unique = list(dict.fromkeys(procs))
    for p in unique:
        if p.alive():
            p.signal(signal.SIGCONT)  # a paused process cannot handle SIGTERM
            p.signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout  # every process got its SIGTERM by now
    late = [p for p in unique if p.wait(max(0.0, deadline - time.monotonic())) is None]
    for p in late:
        p.signal(signal.SIGKILL)
    for p in late:
        p.wait(10)
    for p in unique:
        p._forget()
    return [p.popen.returncode for p in procs]


def kill_all() -> None:
    """Kill every child still alive (atexit and signal handlers call this)."""
    with _live_lock:
        procs = list(_live)
    for p in procs:
        p.kill()


atexit.register(kill_all)

# Who started a recorded process: a process is stale only once this owner is gone.
_OWNER = {"owner_pid": os.getpid(), "owner_started": psutil.Process().create_time()}


def owner_record() -> dict[str, object]:
    """This harness process as an owner: pid, start time and host (for `alive`)."""
    me = psutil.Process()
    return {"pid": me.pid, "created": me.create_time(), "host": socket.gethostname()}


def alive(pid: object, created: object = None, host: object = None) -> bool:
    """Whether process `pid` lives and, when `created` is given, is the one that started then (not
    an unrelated process that reused the pid). The one owner check of the harness: run owners,
    pid files' owners, port reservations and the `bfh up` supervisor all ask it.

    A `host` other than this one counts as alive: a run on a shared folder is not ours to judge.
    """
    if host not in (None, socket.gethostname()):
        return True
    try:
        proc = psutil.Process(int(str(pid)))
        if created is not None and abs(proc.create_time() - float(str(created))) > 0.5:
            return False
        return proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, ValueError, TypeError):
        return False


def reap_stale(pid_dir: str | Path, keep_children_of: int | None = None) -> list[int]:
    """The one reaper: kill the process groups recorded in `pid_dir` by a harness that is gone.
    Returns the pids killed.

    Records of a live harness (this one or another running beside it) are left alone, as are
    children of `keep_children_of`; only a process whose command line is the recorded one is
    signalled (a reused pid never is). Pid files of dead or foreign processes are dropped.
    """
    killed: list[int] = []
    pid_dir = Path(pid_dir)
    if not pid_dir.is_dir():
        return killed
    for f in sorted(pid_dir.glob("*.json")):
        try:
            rec = json.loads(f.read_text())
            if "owner_pid" in rec and alive(rec["owner_pid"], rec.get("owner_started")):
                continue
            proc = psutil.Process(int(rec["pid"]))
            if keep_children_of is not None and proc.ppid() == keep_children_of:
                continue
            if proc.cmdline() == rec["cmd"]:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # spawn makes every child a group leader
                except ProcessLookupError:
                    os.kill(proc.pid, signal.SIGKILL)  # recorded by hand: not a group leader
                killed.append(proc.pid)
                if proc.ppid() != os.getpid():  # a child of ours is reaped by its Popen
                    with contextlib.suppress(psutil.Error):
                        proc.wait(5)
        except psutil.AccessDenied:
            continue
        except (psutil.NoSuchProcess, ProcessLookupError, ValueError, KeyError, TypeError, OSError):
            pass
        f.unlink(missing_ok=True)
    return killed


def reap_stale_runs(root: str | Path) -> list[int]:
    """`reap_stale` for every run folder under `root` (`<root>/<run>/pids/`)."""
    killed: list[int] = []
    if Path(root).is_dir():
        for pid_dir in sorted(Path(root).glob("*/pids")):
            killed += reap_stale(pid_dir)
    return killed
