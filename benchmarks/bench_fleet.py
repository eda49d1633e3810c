"""Fleet capacity: the largest fleet of reference agents this machine drives with a correct verdict.

    .venv/bin/python -m pytest benchmarks/bench_fleet.py -m benchmark -s -p no:xdist
    BFH_FLEET_SIZES=100 BFH_FLEET_RUNS=3 BFH_FLEET_EVENTS=1000 BFH_FLEET_STATUS=30 (the defaults) ...
    BFH_FLEET_AGENT_CMD: another agent command (a defect's: agent_under_test.defects.command)
    BFH_FLEET_TOPOLOGY=pair: another topology (default: the entry's own, pair-fleet; docs/fleet.md)

Each size in BFH_FLEET_SIZES (ascending) runs `fleet-masterslave` (one pair, kill -9 the master)
BFH_FLEET_RUNS times, with the controller publishing BFH_FLEET_EVENTS topology events at
BFH_FLEET_RATE per second (20)
(fan-out: events x agents deliveries; each agent adds 30 status events to the controller). Per
run: the verdict, the wall time, deliveries reconciled, the reconcile time, deliveries per second
through the fault proxy (receipts over the traffic phase), the agents' peak memory (RSS; packed
members: their processes' summed, per member) and CPU time per agent, sampled from /proc every
0.5 s, and the fleet promises' figures (recovery p50/p95/max, the storm's peak, every agent
back). Medians per size are printed and written to reports/bench-fleet-<time>.json. A size
whose median run fails its verdict or takes more than BFH_FLEET_LIMIT_S (300) is the limit:
larger sizes are not tried.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.catalog import scenarios as catalog  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


class AgentSampler:
    """Peak RSS and CPU seconds of every reference agent process (matched by its command line)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.rss: dict[int, int] = {}
        self.cpu: dict[int, float] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> AgentSampler:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for p in Path("/proc").iterdir():
                if not p.name.isdigit():
                    continue
                try:
                    if self.marker not in (p / "cmdline").read_bytes().decode(errors="replace"):
                        continue
                    stat = (p / "stat").read_text().rsplit(")", 1)[1].split()
                    pid = int(p.name)
                    self.rss[pid] = max(self.rss.get(pid, 0), int(stat[21]) * PAGE)
                    self.cpu[pid] = (int(stat[11]) + int(stat[12])) / TICKS
                except (OSError, IndexError, ValueError):
                    continue


def one_run(size: int, events: int, reports: Path, rate: float = 20.0, status: int = 30) -> dict[str, Any]:
    base = catalog.SCENARIOS["fleet-masterslave"]
    params = {**base.params, "status_count": status}
    sc = catalog.with_changes("fleet-masterslave", count=events, rate=rate, params=params)
    agent_cmd = os.environ.get("BFH_FLEET_AGENT_CMD") or None  # e.g. a defect's command
    t0 = time.monotonic()
    with AgentSampler("agent_under_test.") as s, AgentSampler("activemq.jar") as brokers:
        out = catalog.run(
            sc,
            catalog.topology_named(os.environ.get("BFH_FLEET_TOPOLOGY") or sc.topology),
            reports=reports,
            show_progress=False,
            fleet=size,
            agent_cmd=agent_cmd,
        )
    r = out.result
    summary = r.summary or {}
    deliveries = int((summary.get("deliveries") or {}).get("expected", 0))
    receipts = int((summary.get("totals") or {}).get("receipts", deliveries) or deliveries)
    traffic_s = r.phases_s.get("traffic", 0.0) + r.phases_s.get("settle", 0.0)
    n = size + 2  # the members and the controller's two roles, packed or not
    v = r.verdict
    return {
        "size": size,
        "verdict": out.verdict,
        "broken": summary.get("broken", []),
        "wall_s": round(time.monotonic() - t0, 1),
        "deliveries": deliveries,
        "reconcile_s": r.phases_s.get("reconcile"),
        "deliveries_per_s": round(receipts / traffic_s, 1) if traffic_s else None,
        "agent_processes": len(s.rss),
        "rss_mb_per_agent": round(sum(s.rss.values()) / n / 1e6, 1),
        "rss_gb_agents": round(sum(s.rss.values()) / 1e9, 2),  # each process's peak, summed
        "cpu_s_per_agent": round(sum(s.cpu.values()) / n, 2),
        "fleet_recovery": v.check("fleet_recovery").detail if v else None,
        "reconnect_storm": v.check("reconnect_storm").detail if v else None,
        # the brokers' CPU over the traffic: near 1 core, the topic's dispatch is the limit
        "broker_cores": round(sum(brokers.cpu.values()) / traffic_s, 2) if traffic_s else None,
        "phases_s": r.phases_s,
        "run_dir": str(r.run_dir),
    }


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = (
        "wall_s", "deliveries", "reconcile_s", "deliveries_per_s", "rss_mb_per_agent", "cpu_s_per_agent",
        "broker_cores",
    )  # fmt: skip
    out: dict[str, Any] = {"size": runs[0]["size"], "runs": len(runs)}
    for k in keys:
        xs = [x[k] for x in runs if isinstance(x.get(k), int | float)]
        out[k] = round(statistics.median(xs), 2) if xs else None
    out["verdicts"] = [x["verdict"] for x in runs]
    return out


@pytest.mark.benchmark
@pytest.mark.timeout(7200)  # a size runs 3 fleets of several minutes each
def test_fleet_capacity(tmp_path: Path) -> None:
    sizes = [int(x) for x in os.environ.get("BFH_FLEET_SIZES", "100").split(",")]
    n_runs = int(os.environ.get("BFH_FLEET_RUNS", "3"))
    events = int(os.environ.get("BFH_FLEET_EVENTS", "1000"))
    rate = float(os.environ.get("BFH_FLEET_RATE", "20"))
    status = int(os.environ.get("BFH_FLEET_STATUS", "30"))  # status events per member
    limit_s = float(os.environ.get("BFH_FLEET_LIMIT_S", "300"))
    reports = Path(os.environ.get("BFH_FLEET_REPORTS", str(tmp_path / "reports")))
    table, largest = [], 0
    for size in sorted(sizes):
        runs = [one_run(size, events, reports, rate, status) for _ in range(n_runs)]
        for x in runs:
            print(f"\nfleet {size}: {json.dumps({k: v for k, v in x.items() if k != 'phases_s'})}")
        m = medians(runs)
        table.append({"median": m, "runs": runs})
        print(f"\nfleet {size} median of {n_runs}: {json.dumps(m)}")
        passed = sum(v == "pass" for v in m["verdicts"]) * 2 > len(runs)
        if not passed or (m["wall_s"] or 0) > limit_s:
            print(f"fleet {size}: the limit (verdicts {m['verdicts']}, wall {m['wall_s']} s)")
            break
        largest = size
    out = ROOT / "reports" / f"bench-fleet-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"largest_correct": largest, "sizes": table}, indent=2, default=str))
    print(f"\nlargest fleet with a correct verdict within {limit_s:g} s: {largest}; {out}")
    assert largest > 0, "not even the smallest fleet ran correctly"
