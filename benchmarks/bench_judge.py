"""Benchmark: `bfh judge` on a big run folder (the judge reads the message logs itself).

    python benchmarks/bench_judge.py RUN_DIR MEGABYTES [SUBSCRIPTIONS [AGENTS]]   # write the folder
    .venv/bin/bfh judge RUN_DIR                                          # time this
    BFH_JUDGE_MB=200 pytest benchmarks/bench_judge.py -m benchmark -s    # both, 3 judges, median

The folder is a reconciled-looking run: run.json (agents, workloads, scenario, observations), a
fault log, one publisher and subscriber agents holding `SUBSCRIPTIONS` subscriptions between them
(issue 34: the judge was quadratic in them), every message received once per subscription, and an
analysis/summary.json whose counts are the generator's own. No Spark: the judge never runs it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
T0 = 1_800_000_000.0


def write_big_run(run_dir: Path, megabytes: float, subscriptions: int = 400, agents: int = 20) -> dict:
    """Write the run folder; return its counts. Subscriptions are spread over `agents` subscribers,
    each on its own topic filter `big/<i>/#`; message i goes to topic `big/<i % subs>/x`."""
    run = run_dir.name
    run_dir.mkdir(parents=True, exist_ok=True)
    url = "127.0.0.1:21883"
    subs = [(f"sub-{i % agents}", f"big/{i}/#") for i in range(subscriptions)]
    names = sorted({a for a, _ in subs})
    per_msg = 420 + 190 * 1  # bytes per message: attempt + sent + one receipt
    n = max(1, int(megabytes * 1e6 / per_msg))
    rate = 2000.0
    start, end = T0 + 1.0, T0 + 1.0 + n / rate + 5.0
    logs = {a: (run_dir / "agents" / a) for a in ["pub", *names]}
    files = {}
    for a, d in logs.items():
        d.mkdir(parents=True, exist_ok=True)
        files[a] = (d / "messages.jsonl").open("w", encoding="utf-8")

    def w(agent: str, rec: dict) -> None:
        files[agent].write(json.dumps({"run": run, "agent": agent, **rec}, separators=(",", ":")) + "\n")

    w("pub", {"ts": T0 + 0.5, "event": "connected", "broker": url, "role": "publisher", "reason": ""})
    for a, f in subs:
        role = f"subscriber:{f}"
        w(a, {"ts": T0 + 0.1, "event": "connected", "broker": url, "role": role, "reason": ""})
        w(a, {"ts": T0 + 0.2, "event": "subscribed", "topic": f, "broker": url, "qos": 1, "durable": True})
    for i in range(n):
        ts = start + i / rate
        mid, topic = f"m-{i:09d}", f"big/{i % subscriptions}/x"
        w("pub", {"ts": ts, "event": "send_attempt", "msg_id": mid, "topic": topic, "broker": url,
                  "attempt": 1, "qos": 1})  # fmt: skip
        w("pub", {"ts": ts + 0.002, "event": "sent", "msg_id": mid, "topic": topic, "broker": url,
                  "attempts": 1, "qos": 1})  # fmt: skip
        a, f = subs[i % subscriptions]
        w(a, {"ts": ts + 0.004, "event": "received", "msg_id": mid, "topic": topic, "broker": url,
              "subscription": f})  # fmt: skip
    for fh in files.values():
        fh.close()
    workloads = {a: {"run": run, "agent": a, "protocol": "mqtt", "subscriptions": [], "publications": []}
                 for a in names}  # fmt: skip
    for a, f in subs:
        workloads[a]["subscriptions"].append({"topic": f, "qos": 1, "durable": True})
    agent_rows = [
        {"name": a, "conf": {"mb.urls": url, "mb.publisher.timeout": "900"}, "workload": wl}
        for a, wl in workloads.items()
    ]
    agent_rows.append({"name": "pub", "conf": {"mb.urls": url, "mb.publisher.timeout": "900"},
                       "workload": {"publications": [{"topic": "big/0/x", "qos": 1, "count": n,
                                                      "rate_per_s": rate}]}})  # fmt: skip
    launched = {a["name"]: T0 for a in agent_rows}
    stopped = {a["name"]: end + 1 for a in agent_rows}
    (run_dir / "run.json").write_text(json.dumps({
        "run": run, "agents": agent_rows, "scenario": {"name": "big", "gates": None, "params": {}},
        "links": [{"name": "pair-1-mqtt", "listen": url, "upstream": "127.0.0.1:1883", "kind": "client",
                   "broker": "pair-1"}],
        "brokers": {"pair-1": {"group": "pair"}},
        "observations": {"agents_launched_ts": launched, "agents_stopped_ts": stopped,
                         "agent_exit": {a: 0 for a in launched}, "nemesis_errors": [], "stalled": False},
    }))  # fmt: skip
    mid = start + n / rate / 2
    (run_dir / "faults.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "ts": t,
                    "run": run,
                    "fault_id": "f001-latency",
                    "event": ev,
                    "fault": "latency",
                    "target": "pair-1-mqtt",
                    "params": {},
                }
            )
            + "\n"  # fmt: skip
            for t, ev in ((mid, "fault_start"), (mid + 2, "fault_end"))
        )
    )
    counts = {"attempted": n, "acknowledged": n, "dropped": 0, "in_doubt": 0}
    summary = {
        "run": run,
        "totals": counts,
        "deliveries": {"expected": n, "ok": n, "lost": 0, "duplicated": 0},
        "unexpected": 0,
        "reasons": [],
        "warnings": [],
    }
    (run_dir / "analysis").mkdir(exist_ok=True)
    (run_dir / "analysis" / "summary.json").write_text(json.dumps(summary, indent=2))
    return {"messages": n, "subscriptions": subscriptions, "bytes": _log_bytes(run_dir)}


def _log_bytes(run_dir: Path) -> int:
    return sum(p.stat().st_size for p in run_dir.glob("agents/*/messages.jsonl"))


@pytest.mark.benchmark
def test_judge_is_linear(tmp_path: Path) -> None:
    mb = float(os.environ.get("BFH_JUDGE_MB", "200"))
    run_dir = tmp_path / "20990101-000000-big"
    subs, agents = int(os.environ.get("BFH_JUDGE_SUBS", "2000")), int(os.environ.get("BFH_JUDGE_AGENTS", "1"))
    info = write_big_run(run_dir, mb, subs, agents)
    times = []
    for _ in range(3):
        t = time.monotonic()
        p = subprocess.run(
            [str(REPO / ".venv/bin/bfh"), "judge", str(run_dir)], capture_output=True, text=True
        )
        times.append(time.monotonic() - t)
        assert p.returncode in (0, 1), p.stderr[-2000:]
    print(f"\njudge of {info['bytes'] / 1e6:.0f} MB ({info}): {[round(x, 1) for x in times]} s, "
          f"median {statistics.median(times):.1f} s")  # fmt: skip
    assert statistics.median(times) < 60


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4, 5):
        sys.exit(__doc__)
    subs = int(sys.argv[3]) if len(sys.argv) >= 4 else 400
    agents = int(sys.argv[4]) if len(sys.argv) == 5 else 20
    print(json.dumps(write_big_run(Path(sys.argv[1]).resolve(), float(sys.argv[2]), subs, agents)))
