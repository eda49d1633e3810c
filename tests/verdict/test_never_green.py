"""Issue 60 item 3: a crashed or missing checker is never a pass, under any gate; the verdict keeps
each promise's own status; the overload note covers only the promises it excused. On a copy of a
real reconciled run folder (the masterslave rejudge fixture: PASS as recorded)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.verdict import judge
from harness.verdict.checks import PROMISES, Promise
from harness.verdict.judge import _unknown_note
from harness.verdict.overload import RERUN

FIXTURE = Path(__file__).parents[1] / "fixtures" / "rejudge" / "20261126-144907-masterslave-fb73"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    d = Path(shutil.copytree(FIXTURE, tmp_path / FIXTURE.name))
    (d / "manifest.json").unlink()
    return d


def _lost(d: Path, n: int) -> None:
    p = d / "analysis" / "summary.json"
    s = json.loads(p.read_text())
    s["deliveries"]["lost"] = n
    p.write_text(json.dumps(s))


@pytest.mark.parametrize("gate", ["all", "agent"])
def test_a_crashed_at_least_once_is_unknown_under_either_gate(
    run: Path, gate: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert judge(run, gate=gate).verdict == "pass"

    def boom(v: object) -> None:
        raise ValueError("a value no checker expected")

    monkeypatch.setitem(PROMISES, "at_least_once", Promise("at_least_once", "raises", boom))
    v = judge(run, gate=gate)
    assert v.check("at_least_once").status == "unknown", v.message()
    assert v.verdict == "unknown" and "at_least_once: the checker crashed" in v.why_unknown
    assert RERUN not in v.note  # not the machine's: no overload note


@pytest.mark.parametrize("gate", ["all", "agent"])
def test_a_missing_messages_parquet_never_passes_at_least_once(run: Path, gate: str) -> None:
    shutil.rmtree(run / "analysis" / "messages.parquet")
    v = judge(run, gate=gate)
    assert v.check("at_least_once").status == "unknown" and v.verdict == "unknown", v.message()
    assert "messages.parquet is missing" in v.why_unknown


def test_losses_counted_without_blame_rows_are_not_a_pass_under_the_agent_gate(run: Path) -> None:
    _lost(run, 2)  # the reconciliation counts 2 lost; its messages.parquet holds no row of them
    assert judge(run, gate="all").check("at_least_once").status == "fail"
    v = judge(run, gate="agent")
    c = v.check("at_least_once")
    assert c.status == "unknown" and "no blame rows" in c.detail, v.message()
    assert v.verdict == "unknown"


def test_the_overload_note_covers_only_what_it_excused() -> None:
    both = _unknown_note(["at_least_once", "recovery"], ["recovery"])
    assert "['recovery'] inconclusive: the machine was overloaded" in both
    assert "['at_least_once'] could not be judged (not the machine's load)" in both
    assert RERUN not in _unknown_note(["at_least_once"], ["recovery"])  # recovery was not left unknown
