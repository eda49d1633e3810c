"""Did the harness and the brokers get the CPU they needed? Measured during every run.

Two daemon threads in the harness process, started and stopped by the run loop (runner.py):
- the probe sleeps PROBE_S in a loop and records each oversleep (its scheduling delay);
- the sampler, every SAMPLE_S, closes a sample (harness/contracts/loadlog.py): the probe's worst
  and total delay since the last one, the fault proxy API's round trip, each broker's time from
  TCP connect to its first OpenWire byte (WireFormatInfo, sent by the JVM on accept: the broker's
  own responsiveness; the socket closes before any handshake, so the broker makes no connection
  of it and logs nothing), the 1-minute load average and the CPUs the harness may use (the run
  queue per core: a starved machine whose sleepers still wake on time shows there), and the CPU
  seconds the agents' own processes used since the last sample (every process of each agent's
  process group, so a fleet's members and an agent's children count: /proc/<pid>/stat), which
  the verdict takes out of the load that can excuse the agent.
Cheap: one proxy GET and one socket per broker a second. `stop()` writes RUN_DIR/load.jsonl and
returns the summary run.json keeps (`observations.load`).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
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
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def group_cpu_s(groups: Iterable[int]) -> dict[int, float]:
    """pid -> CPU seconds (user + system) of every live process whose process group is one of
    `groups` (an agent is launched as its own group: harness/procs.py)."""
    want, out = set(groups), dict[int, float]()
    if not want:
        return out
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                raw = f.read()
        except OSError:  # gone meanwhile
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()  # after "pid (comm)": state is field 3
        if len(fields) > 12 and int(fields[2]) in want:
            out[int(entry.name)] = (int(fields[11]) + int(fields[12])) * TICK_S
    return out


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
    def __init__(
        self,
        run_dir: Path,
        proxy_url: str | None,
        brokers: dict[str, tuple[str, int]],
        agent_groups: Callable[[], Iterable[int]] = tuple,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.agent_groups = agent_groups  # the agents' process groups, asked at each sample
        self._agent_cpu: dict[int, float] = {}
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
    def of(cls, env: Any, agent_groups: Callable[[], Iterable[int]] = tuple) -> LoadProbe:
        """The probe of a running Environment: its proxy, its brokers' OpenWire ports, and
        `agent_groups` (the process groups of the agents launched so far)."""
        brokers = {}
        for b in env.plan.brokers.values():
            port = b.witness_port or b.ports.get("openwire")
            if port:
                brokers[b.name] = ("127.0.0.1", int(port))
        url = getattr(env.proxy, "url", None)
        return cls(env.run_dir, url, brokers, agent_groups)

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
            "agents_cpu_s": round(self._agents_cpu_s(), 3),
        }
        self.rows.append(row)
        return row

    def _agents_cpu_s(self) -> float:
        """The CPU seconds the agents' processes used since the last sample (a process new since
        then counts from its start; one gone since then counts until its last sample)."""
        try:
            now = group_cpu_s(self.agent_groups())
        except Exception:  # noqa: BLE001 - bookkeeping only: an unreadable /proc counts nothing
            return 0.0
        used = sum(max(0.0, t - self._agent_cpu.get(pid, 0.0)) for pid, t in now.items())
        self._agent_cpu = now
        return used

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
