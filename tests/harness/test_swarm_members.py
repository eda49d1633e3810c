"""harness.run.members: a fleet's members handed to a backend that runs them (--backend swarm).
Pure: the backend here is a recording stand-in of the `SupportsMembers` protocol (the real one is
tests/swarm's); what is tested is the hand-over: the members file, the agent files, liveness and
exit codes of the members seen as processes."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.agents.launch import REFERENCE_COMMAND, AgentError, AgentSpec, workload
from harness.backends import SupportsMembers
from harness.run import members


class Recorder:
    def __init__(self) -> None:
        self.states: dict[int, tuple[str, int | None]] = {}
        self.signals: list[tuple[int, int]] = []
        self.ran: tuple[Path, list[dict[str, Any]]] | None = None

    def clock_endpoint(self) -> tuple[str, int]:
        return "127.0.0.1", 4321

    def run_members(self, members_file: Path, members: list[dict[str, Any]]) -> None:
        self.ran = (members_file, members)

    def member_state(self, slot: int) -> tuple[str, int | None]:
        return self.states.get(slot, ("running", None))

    def signal_member(self, slot: int, sig: int) -> None:
        self.signals.append((slot, sig))


def spec(name: str, command: str = REFERENCE_COMMAND) -> AgentSpec:
    conf = {"mb.urls": "tcp://127.0.0.1:1883"}
    return AgentSpec(name, conf, workload("mqtt", ["topology/pair/#"]), command)


def test_members_go_to_the_backend_and_the_rest_is_launched_here(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(members.FAKETIME_ENV, "fleet-pair-002=+20")
    be = Recorder()
    assert isinstance(be, SupportsMembers)
    env = SimpleNamespace(backend=be, run_dir=tmp_path, run_id="r1")
    local_names: list[str] = []

    def local(specs: list[AgentSpec], run_dir: Path, run_id: str) -> list[Any]:
        local_names.extend(s.name for s in specs)
        return [SimpleNamespace(spec=s) for s in specs]

    specs = [spec("ctl-sub-pair"), spec("fleet-pair-001"), spec("fleet-pair-002")]
    got = members.launch(env, specs, local)
    assert [a.spec.name for a in got] == ["ctl-sub-pair", "fleet-pair-001", "fleet-pair-002"]
    assert local_names == ["ctl-sub-pair"]
    assert be.ran is not None
    mfile, ms = be.ran
    doc = json.loads(mfile.read_text())
    assert doc["clock"] == {"host": "127.0.0.1", "port": 4321}
    assert [m["name"] for m in doc["members"]] == ["fleet-pair-001", "fleet-pair-002"]
    first, second = doc["members"]
    assert first["argv"][:3] == ["python3", "-m", "agent_under_test.reference"]
    assert "faketime" not in first and second["faketime"] == "+20"
    adir = tmp_path / "agents" / "fleet-pair-001"
    assert (adir / "agent.conf").exists() and json.loads((adir / "workload.json").read_text())["run"] == "r1"


def test_a_member_is_a_process_until_it_wrote_its_exit(tmp_path: Path) -> None:
    be = Recorder()
    m = members.RemoteMember("fleet-pair-001", be, 1, tmp_path)
    assert m.alive() and m.wait(0.3) is None
    m.signal(signal.SIGCONT)  # nothing to thaw: not sent
    m.signal(signal.SIGTERM)
    assert be.signals == [(1, signal.SIGTERM)]
    (tmp_path / "exit.json").write_text('{"code": 0}')
    assert m.wait(5) == 0 and not m.alive() and m.popen.returncode == 0


def test_a_member_whose_task_ended_without_an_exit_record(tmp_path: Path) -> None:
    be = Recorder()
    be.states[1] = ("done", None)  # its node died: no exit.json, no exit code
    be.states[2] = ("done", 137)
    assert members.RemoteMember("a", be, 1, tmp_path / "a").wait(1) == -9
    assert members.RemoteMember("b", be, 2, tmp_path / "b").wait(1) == 137


def test_an_agent_teams_command_is_refused_without_its_own_image(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("BFH_MEMBER_IMAGE", raising=False)
    with pytest.raises(AgentError, match="BFH_MEMBER_IMAGE"):
        own = spec("fleet-pair-001", "/opt/agent --config {config}")
        members.member_argv(own, tmp_path, tmp_path, tmp_path)
