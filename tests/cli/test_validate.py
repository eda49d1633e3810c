"""`bfh validate` exit codes against real brokers: 0 on a passing pair, 1 on seed 002's
static:(master,slave) anti-pattern, 2 on a broken file or a missing agent binary, with nothing
left running."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli.support import ROOT, bfh

pytestmark = [pytest.mark.broker, pytest.mark.spark]


def running_under(path: Path) -> list[str]:
    """Command lines of live processes that mention `path` (brokers, proxy, agents of that folder)."""
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(path) in cmd:
                out.append(cmd)
    return out


def test_validate_passing_pair(tmp_path: Path) -> None:
    p = bfh("validate", "pair", "--scenarios", "masterslave", "--reports", str(tmp_path), "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    data = json.loads(p.stdout)
    [row] = data["scenarios"]
    assert row["verdict"] == "pass" and row["lost"] == 0
    assert row["recovery_s"] is not None and row["recovery_s"] > 0
    assert Path(row["report"]).exists() and (Path(row["run_dir"]) / "summary.md").exists()
    index = Path(data["index"]).read_text()
    assert os.path.relpath(row["report"], tmp_path) in index, "the index links the scenario's report"
    assert not running_under(tmp_path)


# extended: the default run gates the same defect (scenarios/test_controls.py); this is its CLI path
@pytest.mark.extended
def test_validate_flags_seed002_static_list(tmp_path: Path) -> None:
    topo = ROOT / "harness/topologies/seed002-static-list.yaml"
    p = bfh("validate", str(topo), "--scenarios", "network", "--reports", str(tmp_path), "--json")
    assert p.returncode == 1, p.stderr[-3000:]
    [row] = json.loads(p.stdout)["scenarios"]
    assert row["verdict"] == "fail"
    assert any("bridges failed to connect" in r for r in row["reasons"]), row["reasons"]
    assert "bridges failed to connect" in (Path(row["report"])).read_text(), "the report names the reason"
    assert not running_under(tmp_path)


def test_validate_broken_file_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "broken.yaml"
    bad.write_text("name: broken\ngroups:\n  - name: a\n    kind: quad\n")
    reports = tmp_path / "reports"
    p = bfh("validate", str(bad), "--reports", str(reports))
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "kind" in p.stderr, p.stderr
    assert not reports.exists() or not any(reports.iterdir()), "nothing was started"
    assert not running_under(tmp_path)


def test_validate_unknown_scenario_exit_2(tmp_path: Path) -> None:
    p = bfh("validate", "pair", "--scenarios", "nosuch", "--reports", str(tmp_path))
    assert p.returncode == 2 and "unknown scenario 'nosuch'" in p.stderr


def test_validate_missing_agent_binary_exit_2_nothing_left(tmp_path: Path) -> None:
    p = bfh(
        "validate",
        "pair",
        "--scenarios",
        "baseline",
        "--agent-cmd",
        "/nonexistent/agent {config}",
        "--reports",
        str(tmp_path),
    )
    assert p.returncode == 2, p.stderr[-2000:]
    assert p.stderr.strip().splitlines()[-1].startswith("error:")
    assert not running_under(tmp_path)
    assert not list(tmp_path.glob("*/pids/*.json")), "pid files of live processes left"
