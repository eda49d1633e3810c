"""`bfh agent check` end to end, real brokers (run under `flock /tmp/bfh-heavy.lock`, -p no:xdist):
the reference agent passes; a seeded defect's log keeps the contract (its behaviour is the finding);
a broken adapter (tests/fixtures/broken_adapter) is named for each of its mistakes, with the line of
docs/agent-contract.md that states the rule; a command that cannot start is refused before any
broker starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_under_test.defects import command as defect_command
from harness.agents.launch import REFERENCE_COMMAND
from tests.cli.support import ROOT, bfh

BROKEN = "{python} -m tests.fixtures.broken_adapter --config {config} --workload {workload} --log {log}"
DOC = ROOT / "docs" / "agent-contract.md"


def _check(tmp_path: Path, command: str, *extra: str) -> tuple[int, dict[str, Any]]:
    p = bfh("agent", "check", command, "--json", "--reports", str(tmp_path), *extra, timeout=400)
    assert p.stdout.strip(), p.stderr[-3000:]
    return p.returncode, json.loads(p.stdout)


def _record(where: str) -> dict[str, Any]:
    path, _, no = where.rpartition(":")
    return dict(json.loads(Path(path).read_text(encoding="utf-8").splitlines()[int(no) - 1]))


@pytest.mark.broker
@pytest.mark.spark
@pytest.mark.timeout(420)
def test_the_reference_agent_keeps_the_contract(tmp_path: Path) -> None:
    code, out = _check(tmp_path, REFERENCE_COMMAND)
    assert code == 0 and out["contract"] == [], json.dumps(out, indent=1)[:4000]
    acks = next(n for n in out["notes"] if n.startswith("acks seen"))
    assert int(acks.rsplit(" ", 1)[1]) > 100, acks  # the wire rules were measured, not vacuous
    assert out["verdict"] in ("pass", "fail")  # the behaviour section ran (the verdict's promises)


@pytest.mark.extended  # about 60 s; the broken adapter below gates the check's naming by default
@pytest.mark.broker
@pytest.mark.spark
@pytest.mark.timeout(420)
def test_a_seeded_defect_logs_by_the_contract_and_its_behaviour_is_the_finding(tmp_path: Path) -> None:
    code, out = _check(tmp_path, defect_command("never_resubscribes"))
    assert code == 0 and out["contract"] == [], json.dumps(out["contract"], indent=1)[:4000]
    assert out["behaviour"] and out["verdict"] == "fail", out["behaviour"]
    assert {"recovery", "at_least_once"} & {b["rule"] for b in out["behaviour"]}


@pytest.mark.broker
@pytest.mark.timeout(300)
def test_a_broken_adapter_is_named_for_each_mistake_with_the_contract_line(tmp_path: Path) -> None:
    code, out = _check(tmp_path, BROKEN, "--contract-only")
    assert code == 1, json.dumps(out, indent=1)[:4000]
    doc = DOC.read_text(encoding="utf-8").splitlines()
    by_rule: dict[str, list[dict[str, Any]]] = {}
    for f in out["contract"]:
        by_rule.setdefault(f["rule"], []).append(f)
        line = int(f["contract"].rpartition(":")[2])
        assert doc[line - 1].startswith(f"**{f['rule']}**"), (f, doc[line - 1])
    # 1. `received` after the ack (C-15), named at a `received` record
    late = [f for f in by_rule.get("C-15", []) if "after the agent acknowledged" in f["what"]]
    assert late and _record(late[0]["where"])["event"] == "received", by_rule.keys()
    # 2. the publisher's missing `connected` (C-8), named at its first record on no connection
    # (a late `received` after a subscriber's close is named by C-8 too: it may come first)
    missing = [
        f
        for f in by_rule.get("C-8", [])
        if "`connected` is missing" in f["what"] and "publisher" in f["what"]
    ]
    assert missing, by_rule.get("C-8")
    assert _record(missing[0]["where"])["event"] in ("send_attempt", "sent")
    # 3. the wrong prefix of a failed attempt (C-9), named at that `disconnected`
    prefix = [f for f in by_rule.get("C-9", []) if "connect_failed:" in f["what"]]
    assert prefix and _record(prefix[0]["where"])["reason"].startswith("connection_failed:"), by_rule.get(
        "C-9"
    )


def test_a_command_that_cannot_start_is_refused_before_any_broker(tmp_path: Path) -> None:
    p = bfh("agent", "check", "/no/such/agent --log {log}", "--reports", str(tmp_path / "r"), timeout=60)
    assert p.returncode == 2 and "could not run" in p.stdout and "/no/such/agent" in p.stdout, p
    assert not (tmp_path / "r").exists()


def test_pytest_option_runs_the_check_before_the_suite(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "--bfh-agent-check", "/no/such/agent {log}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert p.returncode == 2, (p.stdout[-2000:], p.stderr[-2000:])
    assert "could not run" in p.stdout and "1 passed" not in p.stdout


@pytest.mark.extended  # about 40 s of brokers; tests/agentcheck/test_leftovers.py gates the mechanism
@pytest.mark.broker
@pytest.mark.timeout(300)
def test_a_process_the_agent_left_running_is_killed_and_named(tmp_path: Path) -> None:
    """The reference agent, started by a shell that first leaves a `setsid sleep` behind: outside
    the agent's process group, it would outlive the check; the check kills it and names it."""
    command = 'sh -c \'setsid sleep 601 & exec "$0" "$@"\' ' + REFERENCE_COMMAND
    code, out = _check(tmp_path, command, "--contract-only")
    left = [f for f in out["contract"] if f["rule"] == "C-21" and "orphan" in f["what"]]
    assert code == 1 and left and "sleep 601" in left[0]["what"], json.dumps(out["contract"], indent=1)[:3000]
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert "sleep 601" not in ps
