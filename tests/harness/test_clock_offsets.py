"""Clock offsets of members on another host's clock (--backend swarm): the manager's time endpoint,
the member's NTP-style measurement, run.json's `clocks` and the readers' shift. Pure: no brokers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.backends.swarm import member_clocks
from harness.backends.swarmmember import TimeServer, measure
from harness.contracts.msglog import clock_offsets, iter_records, read_clock_offsets

SKEW = 20.0  # the member's clock runs 20 s ahead of the manager's


def test_measure_finds_a_shifted_clock() -> None:
    server = TimeServer().start()
    try:
        got = measure("127.0.0.1", server.port, clock=lambda: time.time() + SKEW)
    finally:
        server.close()
    assert got is not None
    assert got["rtt_s"] < 0.5
    # add the offset to the member's clock to read the manager's: -20 s, within half the round trip
    assert abs(got["offset_s"] + SKEW) <= got["rtt_s"] / 2 + 0.01


def test_measure_without_an_endpoint_is_none() -> None:
    server = TimeServer()
    port = server.port
    server.close()  # nothing answers there
    assert measure("127.0.0.1", port, samples=2, timeout=0.1) is None


def test_clock_offsets_of_a_run_record() -> None:
    run = {
        "clocks": {
            "fleet-pair-001": {"offset_s": -20.0},
            "fleet-pair-002": {"offset_s": 0.0},  # the manager's own clock: no shift
            "fleet-pair-003": {"error": "no clock.json"},
            "fleet-pair-004": {"offset_s": "a lot"},
            "fleet-pair-005": {"offset_s": float("nan")},
        }
    }
    assert clock_offsets(run) == {"fleet-pair-001": -20.0}
    assert clock_offsets({}) == {} and clock_offsets(None) == {} and clock_offsets({"clocks": [1]}) == {}


def test_readers_shift_a_members_records(tmp_path: Path) -> None:
    log = tmp_path / "agents" / "fleet-pair-001" / "messages.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text(
        '{"ts": 1020.5, "event": "connected"}\n{"ts": "x", "event": "sent"}\n{"torn": ', encoding="utf-8"
    )
    (tmp_path / "run.json").write_text(json.dumps({"clocks": {"fleet-pair-001": {"offset_s": -20.0}}}))
    offsets = read_clock_offsets(tmp_path)
    recs = list(iter_records(log, offset_s=offsets["fleet-pair-001"]))
    assert [r["ts"] for r in recs] == [1000.5, "x"]  # a ts that is no number stays as it was
    assert read_clock_offsets(tmp_path / "nowhere") == {}


def test_member_clocks_average_start_and_end(tmp_path: Path) -> None:
    members = []
    for name, clock in {
        "both": {"start": {"offset_s": -20.2}, "end": {"offset_s": -19.8}, "host": "n1", "slot": 1},
        "start-only": {"start": {"offset_s": 3.0}, "end": None, "slot": 2},
    }.items():
        d = tmp_path / name
        d.mkdir()
        (d / "clock.json").write_text(json.dumps(clock))
        members.append({"name": name, "dir": str(d)})
    members.append({"name": "never-ran", "dir": str(tmp_path / "never-ran")})
    got = member_clocks(members)
    assert got["both"]["offset_s"] == pytest.approx(-20.0)
    assert got["both"]["host"] == "n1"
    assert got["start-only"]["offset_s"] == 3.0
    assert "offset_s" not in got["never-ran"] and "error" in got["never-ran"]


def test_a_member_measures_runs_its_agent_and_measures_again(tmp_path: Path) -> None:
    """The member image's entrypoint, run here as a plain process (its container is the swarm
    test's): clock.json with both measurements, the agent's output and its exit code."""
    adir = tmp_path / "agents" / "fleet-pair-001"
    adir.mkdir(parents=True)
    server = TimeServer().start()
    members = tmp_path / "members.json"
    agent = [sys.executable, "-c", "print('agent ran'); raise SystemExit(3)"]
    members.write_text(
        json.dumps(
            {
                "cwd": str(tmp_path),
                "clock": {"host": "127.0.0.1", "port": server.port},
                "members": [{"name": "fleet-pair-001", "dir": str(adir), "argv": agent}],
            }
        )
    )
    entry = Path(__file__).resolve().parents[2] / "harness" / "backends" / "swarmmember.py"
    try:
        proc = subprocess.run(
            [sys.executable, str(entry), str(members)],
            env={**os.environ, "BFH_SLOT": "1"},
            timeout=60,
            capture_output=True,
        )
    finally:
        server.close()
    assert proc.returncode == 3, proc.stderr
    clock = json.loads((adir / "clock.json").read_text())
    assert abs(clock["start"]["offset_s"]) < 0.1 and abs(clock["end"]["offset_s"]) < 0.1
    assert json.loads((adir / "exit.json").read_text())["code"] == 3
    assert "agent ran" in (adir / "agent.out").read_text()
