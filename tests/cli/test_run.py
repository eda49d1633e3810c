"""`bfh run NAME`: the workload options change a catalog scenario's workload (they were silently
ignored before), and a bad value is refused before anything starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.support import bfh


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["baseline", "--count", "0"], "--count: must be above zero"),
        (["baseline", "--rate", "nan"], "--rate: must be above zero"),
        (["baseline", "--publisher-timeout", "x"], "--publisher-timeout: not a number"),
        (["no-such-scenario", "--count", "5"], "unknown scenario 'no-such-scenario'"),
        (["baseline", "--rounds", "0"], "--rounds: must be above zero"),
        (["baseline", "--rerun-unknown", "-1"], "--rerun-unknown: must be at least 0"),
    ],
)
def test_bad_workload_is_refused_before_anything_starts(tmp_path: Path, args: list[str], words: str) -> None:
    p = bfh("run", *args, "--reports", str(tmp_path / "reports"), timeout=60)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert words in p.stderr
    assert not (tmp_path / "reports").exists()


@pytest.mark.broker
@pytest.mark.spark
@pytest.mark.timeout(300)
def test_count_and_rate_apply_to_a_catalog_scenario(tmp_path: Path) -> None:
    p = bfh(
        "run", "baseline", "--count", "23", "--rate", "40", "--reports", str(tmp_path), "--json", timeout=280
    )
    assert p.returncode == 0, (p.stdout, p.stderr[-3000:])
    row = json.loads(p.stdout)
    run = Path(row["run_dir"])
    attempted = set()
    for log in (run / "agents").glob("*/messages.jsonl"):
        for line in log.read_text().splitlines():
            rec = json.loads(line)
            if rec["event"] == "send_attempt":
                attempted.add(rec["msg_id"])
    assert len(attempted) == 23  # the catalog entry's own count is 60
    summary = json.loads((run / "analysis" / "summary.json").read_text())
    assert summary["totals"]["attempted"] == 23 and row["verdict"] == "pass"
