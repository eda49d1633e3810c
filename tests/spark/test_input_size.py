"""Which JVM a reconcile asks for follows the size of what it reads, JSON lines or staged Parquet."""

from __future__ import annotations

from pathlib import Path

from spark_analysis.reconcile import STAGED_TO_JSON, _log_bytes
from spark_analysis.session import SMALL_INPUT_BYTES


def _file(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


def test_json_lines_count_as_they_are(tmp_path: Path) -> None:
    _file(tmp_path / "run" / "agents" / "a" / "messages.jsonl", 1000)
    assert _log_bytes([tmp_path / "run"]) == 1000


def test_a_run_staged_straight_to_parquet_is_not_small(tmp_path: Path) -> None:
    """The benchmark's runs have no JSON lines: their staged Parquet stands for them (it ran on the
    C1-only JVM before, 157 s instead of 89 s at 10M)."""
    run = tmp_path / "bench"
    _file(run / "analysis" / "events.parquet" / "part-00000.parquet", 4 << 20)
    _file(run / "analysis" / "events.parquet" / "_SUCCESS", 0)
    assert _log_bytes([run]) == STAGED_TO_JSON * (4 << 20) > SMALL_INPUT_BYTES
    # a scenario run: its logs and their (smaller) staged copy count once, as the logs
    scen = tmp_path / "scen"
    _file(scen / "agents" / "a" / "messages.jsonl", 300_000)
    _file(scen / "analysis" / "events.parquet" / "part-00000.parquet", 10_000)
    assert _log_bytes([scen]) == 300_000
    assert _log_bytes([run, scen]) == STAGED_TO_JSON * (4 << 20) + 300_000
