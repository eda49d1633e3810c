"""scripts/flakehunt_table.py: every run counted, every failure kept with its first error line."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("flakehunt_table", ROOT / "scripts" / "flakehunt_table.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _junit(path: Path, cases: str) -> Path:
    path.write_text(f'<?xml version="1.0"?><testsuites><testsuite>{cases}</testsuite></testsuites>')
    return path


OK = '<testcase classname="tests.agent.test_liveness" name="test_a[stomp]"/>'
SKIP = '<testcase classname="tests.agent.test_liveness" name="test_s"><skipped message="no"/></testcase>'


def test_table_counts_runs_and_keeps_each_first_error_line(tmp_path: Path) -> None:
    fail = (
        '<testcase classname="tests.agent.test_liveness" name="test_a[stomp]">'
        '<failure message="AssertionError: agent exit status -9 after SIGTERM (10.0s)&#10;more">tb</failure>'
        "</testcase>"
    )
    r1 = _junit(tmp_path / "round-1.xml", OK + SKIP)
    r2 = _junit(tmp_path / "round-2.xml", fail + SKIP)
    (tmp_path / "round-3.xml").write_text("<not xml")
    text = _module().table("hunt", [r1, r2, tmp_path / "round-3.xml"])
    row = next(line for line in text.splitlines() if "test_a[stomp]" in line)
    assert "| 2 | 1 |" in row
    assert "round-2: AssertionError: agent exit status -9 after SIGTERM (10.0s)" in row
    assert "more" not in row
    assert "test_s" not in text  # skipped: not a run
    assert "no JUnit XML" in text  # a round that left no XML is a failure, not silence
    assert "3 rounds, 2 test runs, 2 failures." in text


def test_table_of_clean_rounds_says_zero_failures(tmp_path: Path) -> None:
    text = _module().table("hunt", [_junit(tmp_path / "round-1.xml", OK)])
    assert text.rstrip().endswith("1 rounds, 1 test runs, 0 failures.")
    assert "`tests/agent/test_liveness.py::test_a[stomp]` | 1 | 0 |" in text
