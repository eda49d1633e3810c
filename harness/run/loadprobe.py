"""Did the harness and the brokers get the CPU they needed? Measured during every run.

Two daemon threads in the harness process, started and stopped by the run loop (runner.py):
- the probe sleeps PROBE_S in a loop and records each oversleep (its scheduling delay);
- the sampler, every SAMPLE_S, closes a sample (harness/contracts/loadlog.py): the probe's worst
  and total delay since the last one, the fault proxy API's round trip, each broker's time from
  TCP connect to its first OpenWire byte (WireFormatInfo, sent by the JVM on accept: the broker's
  own responsiveness; the socket closes before any handshake, so the broker makes no connection
  of it and logs nothing), the 1-minute load average and the CPUs the harness may use (the run
  queue per core: a starved machine whose sleepers still wake on time shows there).
Cheap: one proxy GET and one socket per broker a second. `stop()` writes RUN_DIR/load.jsonl and
returns the summary run.json keeps (`observations.load`).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

from harness.contracts import loadlog
from harness.faultproxy.client import ToxiproxyClient
from harness.run.periodic import Periodic

PROBE_S = 0.1
SAMPLE_S = 1.0
#: a broker or the proxy slower than this to answer counts as this (a paused broker: the fault)
ANSWER_TIMEOUT_S = loadlog.NO_ANSWER_S
CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def broker_answer_s(host: str, port: int, timeout: float = ANSWER_TIMEOUT_S) -> float | None:
    """Seconds from connect to the broker's first byte; None when refused or unreachable; the
    timeout when it accepted but did not answer in time."""
    t0 = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(max(0.05, timeout - (time.monotonic() - t0)))
            try:
                s.recv(1)
            except TimeoutError:
                return timeout
    except TimeoutError:
        return timeout
    except OSError:
        return None
    return time.monotonic() - t0


class LoadProbe:
    def __init__(self, run_dir: Path, proxy_url: str | None, brokers: dict[str, tuple[str, int]]) -> None:
        self.run_dir = Path(run_dir)
        self.proxy = ToxiproxyClient(proxy_url, timeout=ANSWER_TIMEOUT_S) if proxy_url else None
        self.brokers = brokers
        self.rows: list[dict[str, Any]] = []
        self.delays: list[float] = []  # every probe oversleep (the summary's p99)
        self._pending: list[float] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._probe_thread: threading.Thread | None = None
        self._sampler = Periodic(SAMPLE_S, self.sample, "bfh-load-sampler")

    @classmethod
    def of(cls, env: Any) -> LoadProbe:
        """The probe of a running Environment: its proxy, its brokers' OpenWire ports."""
        brokers = {}
        for b in env.plan.brokers.values():
            port = b.witness_port or b.ports.get("openwire")
            if port:
                brokers[b.name] = ("127.0.0.1", int(port))
        url = getattr(env.proxy, "url", None)
        return cls(env.run_dir, url, brokers)

    def start(self) -> LoadProbe:
        self._stop.clear()
        self._probe_thread = threading.Thread(target=self._probe, name="bfh-load-probe", daemon=True)
        self._probe_thread.start()
        self._sampler.start()
        return self

    def _probe(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            time.sleep(PROBE_S)
            late = max(0.0, time.monotonic() - t0 - PROBE_S)
            with self._lock:
                self._pending.append(late)

    def _proxy_s(self) -> float | None:
        if self.proxy is None:
            return None
        t0 = time.monotonic()
        try:
            self.proxy.version()
        except Exception:  # noqa: BLE001 - an answer that never came: recorded as none
            return None
        return time.monotonic() - t0

    def sample(self) -> dict[str, Any]:
        """One sample now (the sampler's loop; a test may call it)."""
        with self._lock:
            pending, self._pending = self._pending, []
        self.delays += pending
        row = {
            "ts": round(time.time(), 3),
            "probe_max_s": round(max(pending, default=0.0), 4),
            "probe_sum_s": round(sum(pending), 4),
            "probe_n": len(pending),
            "proxy_s": _rounded(self._proxy_s()),
            "brokers": {n: _rounded(broker_answer_s(h, p)) for n, (h, p) in sorted(self.brokers.items())},
            "load1": round(os.getloadavg()[0], 2),
            "cpus": CPUS,
        }
        self.rows.append(row)
        return row

    def stop(self) -> dict[str, Any] | None:
        """Stop both threads, write load.jsonl, return the summary (None when never started)."""
        if self._probe_thread is None:
            return None
        self._stop.set()
        self._probe_thread.join(timeout=5)
        self._probe_thread = None
        self._sampler.stop()
        try:
            self.sample()
            loadlog.write(self.run_dir, self.rows)
        except Exception:  # noqa: BLE001 - bookkeeping only
            return None
        return loadlog.summarize(self.rows, self.delays)


def _rounded(x: float | None) -> float | None:
    return None if x is None else round(x, 4)
