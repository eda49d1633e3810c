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


def run_member(members_file: Path, slot: int) -> int:
    spec = json.loads(members_file.read_text(encoding="utf-8"))
    member = spec["members"][slot - 1]
    fake = member.get("faketime")
    if fake and os.environ.get("FAKETIME") != fake:  # the agent and our own probes see its clock
        env = {**os.environ, "LD_PRELOAD": FAKETIME_LIB, "FAKETIME": fake}
        env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    out = Path(member["dir"])
    host, port = spec["clock"]["host"], int(spec["clock"]["port"])
    clock: dict[str, Any] = {"slot": slot, "host": socket.gethostname(), "start": measure(host, port)}
    _write_json(out / "clock.json", clock)
    with (out / "agent.out").open("ab") as log:
        proc = subprocess.Popen(member["argv"], stdout=log, stderr=subprocess.STDOUT, cwd=spec["cwd"])
    signal.signal(signal.SIGTERM, lambda *_: proc.send_signal(signal.SIGTERM))
    code = proc.wait()
    clock["end"] = measure(host, port)
    _write_json(out / "clock.json", clock)
    _write_json(out / "exit.json", {"code": code, "at": time.time()})
    return code


if __name__ == "__main__":
    sys.exit(run_member(Path(sys.argv[1]), int(os.environ["BFH_SLOT"])))
