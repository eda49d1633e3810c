"""Memory and CPU per fleet member, by concurrency model (docs/fleet.md, "Packed members").

    flock /tmp/bfh-heavy.lock .venv/bin/python -m pytest benchmarks/bench_packed.py \
        -m benchmark -s -p no:xdist
    BFH_PACK_SIZES=100,500 BFH_PACK_MODELS=threads,evloop,process (process: sizes <= 100 only)

On one running pair, per model and size: N members, each subscribed (durable, its own client id)
to the controller's topology topic and publishing 30 status events at 2/s; then a controller
process publishes 150 events at 10/s (the fan-out). Figures per member: peak RSS (the model's
processes summed, divided by N), CPU seconds from launch to every member subscribed (start),
during the workload (until every member received the 150), and CPU per second idle over 20 s.
- threads: the reference agent packed (agent_under_test.reference.packed, harness.agents.packed),
  at most PACK_CAP members per process: the real semantics;
- evloop: benchmarks/evloop_members.py, one thread and one epoll loop over every paho client,
  no failover semantics (a floor);
- process: one reference agent process per member (the fleet before packing).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.agents.launch import REFERENCE_COMMAND, AgentProcess, AgentSpec, launch_agent  # noqa: E402
from harness.agents.packed import PACK_CAP, launch_packed  # noqa: E402
from harness.run.env import Environment, new_run_dir  # noqa: E402
from harness.topology import builtin_topology  # noqa: E402

EVENTS, RATE, IDLE_S = 150, 10.0, 20.0


def _conf(env: Environment) -> dict[str, str]:
    return {
        "mb.urls": ",".join(env.mb_urls("mqtt")),
        "mb.username": "",
        "mb.password": "",
        "mb.publisher.timeout": "60",
    }


def _pub(topic: str, count: int, rate: float) -> dict[str, Any]:
    return {"topic": topic, "qos": 1, "count": count, "rate_per_s": rate, "payload_bytes": 256}


def _member(env: Environment, root: str, i: int, pack: int) -> AgentSpec:
    body = {
        "protocol": "mqtt",
        "subscriptions": [{"topic": f"{root}/topology/#", "qos": 1, "durable": True}],
        "publications": [
            {
                "topic": f"{root}/status/{i:03d}",
                "qos": 1,
                "count": 30,
                "rate_per_s": 2.0,
                "payload_bytes": 256,
            }
        ],
    }
    return AgentSpec(f"{root}-{i:03d}", _conf(env), body, REFERENCE_COMMAND, stage=1, pack=pack)


class Sampler:
    def __init__(self, pids: list[int]) -> None:
        self.procs = [psutil.Process(p) for p in pids]
        self.peak = 0
        self.fds = 0  # the most open descriptors of one process

    def cpu(self) -> float:
        total = 0.0
        for p in self.procs:
            try:
                t = p.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
            except psutil.NoSuchProcess:
                pass
        return total

    def rss(self) -> int:
        now = 0
        for p in self.procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                now += p.memory_info().rss
        self.peak = max(self.peak, now)
        fds = 0
        for p in self.procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                fds = max(fds, p.num_fds())
        self.fds = max(self.fds, fds)
        return now

    def wait(self, cond: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.rss()
            if cond():
                return True
            time.sleep(0.5)
        return False


def _received(path: Path) -> int:
    try:
        with path.open("rb") as f:
            return sum(b'"received"' in line for line in f)
    except OSError:
        return 0


def _subscribed(path: Path) -> bool:
    try:
        return b'"subscribed"' in path.read_bytes()
    except OSError:
        return False


def _controller(env: Environment, root: str) -> AgentProcess:
    body = {
        "protocol": "mqtt",
        "subscriptions": [],
        "publications": [_pub(f"{root}/topology/Ev", EVENTS, RATE)],
    }
    return launch_agent(AgentSpec(f"{root}-ctl", _conf(env), body), env.run_dir, env.run_id)


def _start(
    env: Environment, model: str, n: int, root: str
) -> tuple[list[int], list[Path], Callable[[], None]]:
    """Launch N members; their pids, their logs, how to stop them."""
    if model == "evloop":
        logdir = env.run_dir / "evloop" / root
        logdir.mkdir(parents=True)
        host = env.mb_urls("mqtt")[0]
        script = str(ROOT / "benchmarks" / "evloop_members.py")
        p = subprocess.Popen([sys.executable, script, host, str(n), root, str(logdir), env.run_id])
        logs = [logdir / f"ev-{root}-{i:03d}.jsonl" for i in range(n)]

        def stop_ev() -> None:
            p.terminate()
            p.wait(20)

        return [p.pid], logs, stop_ev
    specs = [_member(env, root, i, PACK_CAP if model == "threads" else 0) for i in range(n)]
    if model == "threads":
        agents = launch_packed(specs, env.run_dir, env.run_id)
    else:
        agents = [launch_agent(s, env.run_dir, env.run_id) for s in specs]
    procs = list(dict.fromkeys(a.proc for a in agents))

    def stop() -> None:
        for p in procs:
            p.terminate(10)

    return [p.pid for p in procs], [a.log_path for a in agents], stop


def measure(env: Environment, model: str, n: int) -> dict[str, Any]:
    root = f"bp{model[:2]}{n}{int(time.time()) % 100000}"
    t0 = time.monotonic()
    pids, logs, stop = _start(env, model, n, root)
    s = Sampler(pids)
    ok = s.wait(
        lambda: all(_subscribed(p) for p in logs) if model != "evloop" else time.monotonic() - t0 > 15, 300
    )
    start_cpu, subscribed_s = s.cpu(), time.monotonic() - t0
    ctl = _controller(env, root)
    got = s.wait(lambda: all(_received(p) >= EVENTS for p in logs), 300)
    work_cpu = s.cpu() - start_cpu
    ctl.stop()
    c0, t1 = s.cpu(), time.monotonic()
    s.wait(lambda: False, IDLE_S)
    idle = (s.cpu() - c0) / (time.monotonic() - t1)
    stop()
    return {
        "model": model, "members": n, "processes": len(pids), "subscribed": ok, "all_received": got,
        "subscribed_s": round(subscribed_s, 1),
        "rss_mb_per_member": round(s.peak / n / 1e6, 2), "rss_mb_total": round(s.peak / 1e6, 1),
        "cpu_s_start_per_member": round(start_cpu / n, 3),
        "cpu_s_workload_per_member": round(work_cpu / n, 3),
        "max_fds_per_process": s.fds,
        "idle_cores": round(idle, 3), "idle_ms_per_s_per_member": round(idle * 1000 / n, 3),
    }  # fmt: skip


@pytest.mark.benchmark
@pytest.mark.timeout(3600)
def test_packed_models(tmp_path: Path) -> None:
    sizes = [int(x) for x in os.environ.get("BFH_PACK_SIZES", "100,500").split(",")]
    models = os.environ.get("BFH_PACK_MODELS", "threads,evloop,process").split(",")
    run_id, run_dir = new_run_dir(Path(os.environ.get("BFH_PACK_REPORTS", str(tmp_path))), "bench-packed")
    rows = []
    with Environment.up(builtin_topology("pair"), run_dir, run_id) as env:
        for n in sizes:
            for model in models:
                if model == "process" and n > 100:
                    continue
                row = measure(env, model, n)
                print(f"\n{json.dumps(row)}", flush=True)
                rows.append(row)
    out = ROOT / "reports" / f"bench-packed-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))
    print(f"\n{out}")
    assert all(r["all_received"] for r in rows if r["model"] != "evloop"), rows
