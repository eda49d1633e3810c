"""`bfh reconcile` / `bfh judge` on folders that cannot pass: never `pass`, exit 2 when nothing can
be judged, 1 when the run is vacuous."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.support import bfh


@pytest.mark.spark
def test_reconcile_without_message_logs_is_an_error(tmp_path: Path) -> None:
    run = tmp_path / "20990101-000000-empty"
    run.mkdir()
    p = bfh("reconcile", str(run))
    assert p.returncode == 2, (p.stdout, p.stderr[-2000:])
    assert "error:" in p.stderr and "message logs" in p.stderr and "pass" not in p.stdout.lower()
    assert not (run / "analysis").exists(), "refused before anything was reconciled or written"


def test_judge_of_an_unreconciled_folder_is_an_error(tmp_path: Path) -> None:
    p = bfh("judge", str(tmp_path))
    assert p.returncode == 2 and "reconcile it first" in p.stderr


def test_judge_of_a_vacuous_run_fails(tmp_path: Path) -> None:
    """Agents ran (run.json says so) but attempted nothing: non_vacuous is broken, exit 1."""
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "summary.json").write_text(
        json.dumps({"totals": {"attempted": 0, "acknowledged": 0}, "reasons": [], "deliveries": {}})
    )
    (tmp_path / "run.json").write_text(json.dumps({"observations": {"agent_exit": {"a": 0}}}))
    p = bfh("judge", str(tmp_path), "--json")
    assert p.returncode == 1, p.stderr
    [row] = json.loads(p.stdout)
    assert row["verdict"] == "fail" and "non_vacuous" in row["broken"]
