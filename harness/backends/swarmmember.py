"""A swarm member's side, and the manager's time endpoint (stdlib only: baked into the member image).

Inside the member image, `python3 /opt/bfh/harness/backends/swarmmember.py MEMBERS_JSON` is the
entrypoint of every replica of the member service (harness/backends/swarm.py). The replica's
slot (`BFH_SLOT={{.Task.Slot}}`) picks its entry of the members file: its agent name, its command
line and, for a member whose clock is shifted on purpose, a FAKETIME (libfaketime, preloaded by
re-executing this script). It measures its clock against the manager's time endpoint, runs the
agent (SIGTERM forwarded: the agent contract's flush), measures again, and writes
`agents/<name>/clock.json` and `exit.json` beside its message log.

The exchange is NTP's: the member notes t1, the manager answers with its time ts, the member
notes t3; offset = ts - (t1 + t3) / 2 is what to add to the member's clock to read the
manager's, within half the round trip. The sample with the shortest round trip of a few wins.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_REQ = struct.Struct("!Q")  # nonce
_REP = struct.Struct("!Qd")  # nonce, the manager's time.time()
SAMPLES = 9
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
#: the harness SIGKILLs a member 10 s after its SIGTERM (procs.terminate_all): dump stacks before
STACKS_AFTER_S = 8.5
SELECT_SLEEP = "--select-sleep"  # run `-m module` with time.sleep in select (a faked member's agent)


class TimeServer:
    """The manager's time endpoint: a UDP socket answering each request with the manager's clock."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, clock: Callable[[], float] = time.time):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, port))
        self.sock.settimeout(0.2)
        self.port: int = self.sock.getsockname()[1]
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="bfh-time-endpoint", daemon=True)

    def start(self) -> TimeServer:
        self._thread.start()
        return self

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, addr = self.sock.recvfrom(64)
            except (TimeoutError, OSError):
                continue
            if len(data) == _REQ.size:
                (nonce,) = _REQ.unpack(data)
                self.sock.sendto(_REP.pack(nonce, self._clock()), addr)

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2)
        self.sock.close()


def measure(
    host: str, port: int, samples: int = SAMPLES, timeout: float = 1.0, clock: Callable[[], float] = time.time
) -> dict[str, Any] | None:
    """{offset_s, rtt_s, at} of the best of `samples` exchanges (`at`: this clock), or None when
    the endpoint never answered."""
    best: dict[str, Any] | None = None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        for nonce in range(1, samples + 1):
            t1 = clock()
            try:
                s.sendto(_REQ.pack(nonce), (host, port))
                while True:
                    data = s.recv(64)
                    got, ts = _REP.unpack(data)
                    if got == nonce:
                        break
            except (OSError, struct.error):
                continue
            t3 = clock()
            sample = {"offset_s": ts - (t1 + t3) / 2, "rtt_s": t3 - t1, "at": t3}
            if best is None or sample["rtt_s"] < best["rtt_s"]:
                best = sample
    return best


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM forwarded; an agent still running STACKS_AFTER_S later is aborted, so its
    agent.out holds where each of its threads stood (the harness would SIGKILL it soon after)."""
    proc.send_signal(signal.SIGTERM)

    def abort() -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGABRT)

    timer = threading.Timer(STACKS_AFTER_S, abort)
    timer.daemon = True
    timer.start()


def run_member(members_file: Path, slot: int) -> int:
    spec = json.loads(members_file.read_text(encoding="utf-8"))
    member = spec["members"][slot - 1]
    fake = member.get("faketime")
    if fake and os.environ.get("FAKETIME") != fake:  # the agent and our own probes see its clock
        env = {**os.environ, "LD_PRELOAD": FAKETIME_LIB, "FAKETIME": fake}
        # the wall clock only: libfaketime 0.9.10 does not intercept sem_clockwait, so a faked
        # monotonic clock hangs every timed lock, Event or Queue wait of Python 3.11
        env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    # PID 1 of its container ignores a signal it has no handler for: a stop that comes while the
    # member starts (its clock probe) is kept, not lost to the stop grace period's SIGKILL
    early: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: early.append(1))
    out = Path(member["dir"])
    argv = list(member["argv"])
    if fake and argv[1:2] == ["-m"]:
        argv = [argv[0], str(Path(__file__).resolve()), SELECT_SLEEP, *argv[2:]]  # module, args
    host, port = spec["clock"]["host"], int(spec["clock"]["port"])
    clock: dict[str, Any] = {"slot": slot, "host": socket.gethostname(), "start": measure(host, port)}
    _write_json(out / "clock.json", clock)
    if early:  # stopped before its agent started
        _write_json(out / "exit.json", {"code": 0, "at": time.time()})
        return 0
    with (out / "agent.out").open("ab") as log:
        env = {**os.environ, "PYTHONFAULTHANDLER": "1"}  # SIGABRT dumps its threads' stacks
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=spec["cwd"], env=env)
    signal.signal(signal.SIGTERM, lambda *_: _stop(proc))
    if early:  # between the check above and the handler
        _stop(proc)
    code = proc.wait()
    clock["end"] = measure(host, port)
    _write_json(out / "clock.json", clock)
    _write_json(out / "exit.json", {"code": code, "at": time.time()})
    return code


def run_module_with_select_sleep(module: str, args: list[str]) -> None:
    """`python3 -m module args` with time.sleep waiting in select(). Python 3.11's sleep is
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME), which libfaketime 0.9.10 turns into EINVAL
    when the monotonic clock is left unfaked (libfaketime issue #426); select's timeout is relative."""
    import runpy
    import select

    def sleep(secs: float) -> None:
        select.select([], [], [], secs)

    time.sleep = sleep
    sys.path[0] = os.getcwd()  # as with -m, not this script's folder
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    if sys.argv[1:2] == [SELECT_SLEEP]:
        run_module_with_select_sleep(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(run_member(Path(sys.argv[1]), int(os.environ["BFH_SLOT"])))
