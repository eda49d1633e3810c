"""Packed members (agent_under_test.reference.packed, harness.agents.packed): many reference agents
in one process, each with its own connections, client ids and message log; SIGTERM stops the
whole pack within 2 s with every member's log closed. The fleet-level equivalence with process
members is scenarios/test_fleet.py's."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_under_test.defects import command as defect_command
from agent_under_test.reference.agent import ReferenceAgent
from agent_under_test.reference.packed import agent_class
from harness.agents import packed
from harness.agents.launch import REFERENCE_COMMAND, AgentProcess, AgentSpec
from harness.agents.packed import PACK_CAP, agent_module, launch_packed, pack_size
from harness.contracts.msglog import iter_records
from harness.run.env import Environment
from tests.agent.support import events, unique

BOUND_S = 2.0
MEMBERS = 20
COUNT = 10  # messages each member publishes, at 2/s


def _received(m: AgentProcess) -> set[str]:
    return {r["msg_id"] for r in events(m, "received")}


def test_only_the_harness_own_agents_pack() -> None:
    assert agent_module(REFERENCE_COMMAND) == "agent_under_test.reference"
    assert agent_module(defect_command("lockstep_retry")) == "agent_under_test.defects.lockstep_retry"
    assert agent_module("java -jar agent.jar --config {config} --workload {workload} --log {log}") is None
    assert agent_module(REFERENCE_COMMAND + " --extra") is None


def test_pack_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BFH_FLEET_PACK", raising=False)
    assert pack_size(20, cores=2) == 0  # small fleets: a process per member
    assert pack_size(packed.PACK_FROM + 1, cores=4) == math.ceil((packed.PACK_FROM + 1) / 4)
    assert pack_size(1000, cores=2) == PACK_CAP
    monkeypatch.setenv("BFH_FLEET_PACK", "0")
    assert pack_size(1000, cores=2) == 0  # one process per member
    monkeypatch.setenv("BFH_FLEET_PACK", "50")
    assert pack_size(1000, cores=2) == 50


def test_agent_class_of_a_defect_module() -> None:
    assert agent_class("agent_under_test.reference") is ReferenceAgent
    cls = agent_class("agent_under_test.defects.lockstep_retry")
    assert issubclass(cls, ReferenceAgent) and cls.variant == "lockstep_retry"


def test_malformed_members_file_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "members.json"
    bad.write_text('{"config": "x"}', encoding="utf-8")
    p = subprocess.run(
        [sys.executable, "-m", "agent_under_test.reference.packed", "--members", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2, p.stderr
    assert "members.json" in p.stderr


@pytest.mark.broker
@pytest.mark.timeout(300)
def test_packed_members_are_agents_each(healthy_pair: Environment) -> None:
    env = healthy_pair
    root = unique("packed")
    specs = []
    for i in range(MEMBERS):
        conf = {
            "mb.urls": ",".join(env.mb_urls("mqtt")),
            "mb.username": "",
            "mb.password": "",
            "mb.publisher.timeout": "60",
        }
        body = {
            "protocol": "mqtt",
            "subscriptions": [{"topic": f"{root}/#", "qos": 1, "durable": True}],
            "publications": [
                {"topic": f"{root}/{i}", "qos": 1, "count": COUNT, "rate_per_s": 2.0, "payload_bytes": 64}
            ],
        }
        specs.append(AgentSpec(f"{root}-{i:03d}", conf, body, REFERENCE_COMMAND, stage=1, pack=MEMBERS))
    members = launch_packed(specs, env.run_dir, env.run_id)
    assert len({m.proc.pid for m in members}) == 1
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not all(len(events(m, "sent")) == COUNT for m in members):
        time.sleep(0.5)
    assert all(len(events(m, "sent")) == COUNT for m in members), members[0].stderr_tail()
    # each member publishes once its own subscription is confirmed: what was published after
    # every member's was, every member receives
    last_sub = max(events(m, "subscribed")[0]["ts"] for m in members)
    first_try: dict[str, float] = {}
    for m in members:
        for r in events(m, "send_attempt"):
            first_try.setdefault(r["msg_id"], r["ts"])
    want = {mid for mid, ts in first_try.items() if ts > last_sub}
    assert len(want) >= MEMBERS, f"only {len(want)} messages published after every subscription"
    while time.monotonic() < deadline and not all(want <= _received(m) for m in members):
        time.sleep(0.5)
    missing = {m.spec.name: len(want - _received(m)) for m in members if not want <= _received(m)}
    assert not missing, f"members missing messages: {missing}\n{members[0].stderr_tail()}"
    for m in members:  # its own client ids, its own log
        assert {r["agent"] for r in m.records} == {m.spec.name}
    t0 = time.monotonic()
    members[0].proc.terminate(10)
    took = time.monotonic() - t0
    assert members[0].proc.popen.returncode == 0, members[0].stderr_tail()
    assert took < BOUND_S, f"a pack of {MEMBERS} took {took:.2f} s to exit after SIGTERM"
    for m in members:
        text = m.log_path.read_text(encoding="utf-8")
        assert text.endswith("\n"), f"{m.spec.name}: torn last line"
        last = list(iter_records(m.log_path))[-1]
        assert (last["event"], last.get("reason")) == ("disconnected", "shutdown"), last
    pack = json.loads((env.run_dir / "packs" / specs[0].name / "members.json").read_text())
    assert [Path(e["log"]).parent.name for e in pack] == [s.name for s in specs]
