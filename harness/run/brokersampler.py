"""The brokers' accepted connections and CPU over a run (RUN_DIR/broker-usage.jsonl,
harness/contracts/brokerusage.py): what a reconnect storm costs the brokers.

One daemon thread in the harness process (harness/run/periodic.py), started and stopped by the
run loop (runner.py), as harness/run/loadprobe.py is. Every SAMPLE_S: one netlink sock_diag dump
of the established TCP sockets (harness/backends/sockdiag.py: 0.04 ms where /proc/net/tcp walks
the whole hash table), counted per broker on its connector ports, and each broker JVM's CPU time
and memory (psutil).
Local backend only: the brokers must be this machine's processes in this network namespace;
elsewhere `of()` returns None and nothing is recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from harness.backends.local import LocalBackend
from harness.backends.sockdiag import established_by_port
from harness.contracts import brokerusage
from harness.run.periodic import Periodic

SAMPLE_S = 1.0


class BrokerSampler:
    def __init__(
        self, run_dir: Path, pid_of: Callable[[str], int | None], ports: dict[str, set[int]]
    ) -> None:
        self.run_dir = Path(run_dir)
        self.pid_of = pid_of
        self.ports = ports  # broker -> its connector ports (not the witness's own)
        self.rows: list[dict[str, Any]] = []
        self._procs: dict[str, tuple[psutil.Process, float, float]] = {}  # process, cpu s, at
        self._every = Periodic(SAMPLE_S, self.sample, "bfh-broker-sampler")

    @classmethod
    def of(cls, env: Any) -> BrokerSampler | None:
        """The sampler of a running Environment, or None when its brokers are not local processes."""
        if not isinstance(env.backend, LocalBackend):
            return None
        ports = {b.name: set(b.ports.values()) for b in env.plan.brokers.values()}
        return cls(env.run_dir, env.backend.pid, ports)

    def start(self) -> BrokerSampler:
        self._every.start()
        return self

    def _cpu(self, broker: str, pid: int) -> tuple[float | None, float | None]:
        """(cores used since the last sample, RSS in MB) of the broker's process and children."""
        cur = self._procs.get(broker)
        if cur is None or cur[0].pid != pid:  # first sample, or a restarted broker
            cur = (psutil.Process(pid), 0.0, 0.0)
        proc = cur[0]
        procs = [proc, *proc.children(recursive=True)]
        total, rss = 0.0, 0
        for p in procs:
            try:
                t = p.cpu_times()
                total += t.user + t.system
                rss += p.memory_info().rss
            except psutil.Error:
                continue
        now = time.monotonic()
        cores = (total - cur[1]) / (now - cur[2]) if cur[2] and now > cur[2] else None
        self._procs[broker] = (proc, total, now)
        return (None if cores is None else round(max(cores, 0.0), 3)), round(rss / 2**20, 1)

    def sample(self) -> dict[str, Any]:
        """One sample now (the loop's; a test may call it)."""
        est = established_by_port()
        brokers: dict[str, Any] = {}
        for name, ports in sorted(self.ports.items()):
            pid = self.pid_of(name)
            if pid is None:
                self._procs.pop(name, None)
                continue
            try:
                cpu, rss = self._cpu(name, pid)
            except psutil.Error:
                continue
            conns = None if est is None else sum(est.get(p, 0) for p in ports)
            brokers[name] = {"conns": conns, "cpu": cpu, "rss_mb": rss}
        row = {"ts": round(time.time(), 3), "brokers": brokers}
        self.rows.append(row)
        return row

    def stop(self) -> dict[str, Any] | None:
        """Stop the thread, write broker-usage.jsonl, return the summary (None when never started)."""
        if not self._every.stop():
            return None
        try:
            brokerusage.write(self.run_dir, self.rows)
        except Exception:  # noqa: BLE001 - bookkeeping only
            return None
        return brokerusage.summarize(self.rows)
