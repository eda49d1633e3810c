"""`--backend swarm` on a one-node swarm (tests/swarm/conftest.py): a fleet's members as replicas of
a swarm service, brokers and the fault proxy on the manager; nothing left behind; a member whose
clock is shifted on purpose (libfaketime) judged on the manager's clock through its measured
offset."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.backends.swarm import LABEL
from harness.contracts import manifest, runrecord
from harness.contracts.msglog import iter_records

# extended tier (about 2 min both); `-m swarm` selects them alone
pytestmark = [
    pytest.mark.docker,
    pytest.mark.broker,
    pytest.mark.extended,
    pytest.mark.swarm,
    pytest.mark.timeout(1800),
]

SKEW_S = 20  # the faked member's clock runs this far ahead of the manager's


def bfh_run(args: list[str], reports: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    bfh = Path(sys.executable).with_name("bfh")
    cmd = [str(bfh), "run", *args, "--backend", "swarm", "--reports", str(reports), "--json"]
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=1500)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    row: dict[str, Any] = json.loads(proc.stdout)
    row["exit"] = proc.returncode
    row["stderr"] = proc.stderr[-3000:]
    return row


def left_behind(client: Any, run: str) -> list[str]:
    """What the run made and left (by its label: the Docker backend's tests use the same label
    with their own runs' values, and may run meanwhile on another worker)."""
    flt = {"label": f"{LABEL}={run}"}
    out = [f"service {s.name}" for s in client.services.list(filters=flt)]
    out += [f"container {c['Names']}" for c in client.api.containers(all=True, filters=flt)]
    out += [f"network {n['Name']}" for n in client.api.networks(filters=flt)]
    return out


def test_fleet_of_50_passes_on_the_swarm_and_leaves_nothing(swarm: Any, tmp_path: Path) -> None:
    row = bfh_run(["fleet-masterslave", "--fleet", "50"], tmp_path)
    assert row["verdict"] == "pass" and row["exit"] == 0, (row["reasons"], row["stderr"])
    run_dir = Path(row["run_dir"])
    run = runrecord.read(run_dir) or {}
    assert run["backend"] == "swarm"
    members = [m for m in (run.get("clocks") or {}) if m.startswith("fleet-")]
    assert len(members) == 50
    # one host: every member's clock is the manager's, within a few milliseconds
    assert all(abs(run["clocks"][m]["offset_s"]) < 0.05 for m in members), run["clocks"]
    # every member's log came back into the run folder and is sealed by the manifest
    sealed = manifest.load(run_dir)
    logs = [p for p in sealed["files"] if p.startswith("agents/fleet-") and p.endswith("messages.jsonl")]
    assert len(logs) == 50
    assert manifest.verify(run_dir) is None  # raises on anything missing, altered or unlisted
    assert left_behind(swarm, run_dir.name) == []  # the swarm's own networks: the fixture's


def _recovery(run_dir: Path) -> dict[str, float]:
    """Each member's recovery from the master's kill, as the verdict measures it."""
    from harness.verdict.checks.fleetview import FleetView
    from harness.verdict.view import RunView

    fleet = FleetView.of(RunView.load(run_dir))
    assert fleet is not None
    out: dict[str, float] = {}
    for r in fleet.recoveries:
        if r.took_s is not None and r.role.startswith("subscriber"):
            out[r.agent] = r.took_s
    return out


def _latency(run_dir: Path, member: str, offset_s: float) -> float:
    """Median delivery latency of the controller's events at `member`: received at the member
    (its records shifted by `offset_s`) minus sent by the controller (the manager's clock)."""
    sent = {
        r["msg_id"]: r["ts"]
        for r in iter_records(run_dir / "agents" / "ctl-pub-pair" / "messages.jsonl")
        if r.get("event") == "sent"
    }
    log = run_dir / "agents" / member / "messages.jsonl"
    return statistics.median(
        r["ts"] - sent[r["msg_id"]]
        for r in iter_records(log, offset_s=offset_s)
        if r.get("event") == "received" and r.get("msg_id") in sent
    )


def test_a_member_on_a_shifted_clock_is_judged_on_the_managers(swarm: Any, tmp_path: Path) -> None:
    faked = "fleet-pair-002"
    row = bfh_run(
        ["fleet-masterslave", "--fleet", "5"],
        tmp_path,
        env={"BFH_SWARM_FAKETIME": f"{faked}=+{SKEW_S}"},
    )
    assert row["verdict"] == "pass" and row["exit"] == 0, (row["reasons"], row["stderr"])
    run_dir = Path(row["run_dir"])
    clocks = (runrecord.read(run_dir) or {})["clocks"]
    assert clocks[faked]["offset_s"] == pytest.approx(-SKEW_S, abs=0.5)  # its clock was seen ahead
    others = [m for m in clocks if m.startswith("fleet-") and m != faked]
    assert all(abs(clocks[m]["offset_s"]) < 0.05 for m in others)

    # with the shift: its recovery and latency are those of the members on the manager's clock
    shifted = _recovery(run_dir)
    typical = statistics.median(shifted[m] for m in others)
    assert abs(shifted[faked] - typical) < 10, shifted
    lat = {m: _latency(run_dir, m, clocks[m]["offset_s"]) for m in [faked, *others]}
    assert abs(lat[faked] - statistics.median(lat[m] for m in others)) < 1.0, lat

    # without it (the same run folder, its clocks dropped): off by the skew
    raw = tmp_path / "unshifted"
    shutil.copytree(run_dir, raw)
    run = json.loads((raw / "run.json").read_text())
    del run["clocks"]
    (raw / "run.json").write_text(json.dumps(run))
    unshifted = _recovery(raw)
    # its disconnect seen 20 s late: after the fault's window (no recovery found), or 20 s slower
    if faked in unshifted:
        assert unshifted[faked] - shifted[faked] == pytest.approx(SKEW_S, abs=1.0), (unshifted, shifted)
    assert _latency(raw, faked, 0.0) - lat[faked] == pytest.approx(SKEW_S, abs=1.0)
