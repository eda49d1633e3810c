"""Issue 60 item 1: inconclusive is its own outcome, never green. A real pytest session in a small
project judges a real run folder (the rejudge fixture) whose at_least_once checker crashes: the
verdict is unknown; the entry is re-run (--bfh-rerun-unknown), then fails as "inconclusive: <why>"
and the session exits non-zero; `--bfh-unknown=skip` exits 0 and the summary counts the skip."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.run import rounds

from .pluginproject import run_pytest, write_project

FIXTURE = Path(__file__).parents[1] / "fixtures" / "rejudge" / "20261126-144907-masterslave-fb73"

PROJECT = {
    "scenarios/test_unknown.py": f"""
import shutil
from pathlib import Path
from types import SimpleNamespace

from harness.pytest_plugin.conformance.test_catalog import _record_unknown, assert_verdict
from harness.run import rounds
from harness.verdict import judge
from harness.verdict.checks import PROMISES, Promise


def _boom(v):
    raise ValueError("a value no checker expected")


def test_entry(tmp_path, bfh_unknown, record_property):
    PROMISES["at_least_once"] = Promise("at_least_once", "raises", _boom)
    policy, reruns = bfh_unknown
    runs = []

    def attempt(k):
        d = Path(shutil.copytree({str(FIXTURE)!r}, tmp_path / f"run-{{k}}"))
        (d / "manifest.json").unlink(missing_ok=True)
        runs.append((d, judge(d)))
        v = runs[-1][1]
        return rounds.Round(0, v.verdict, d, why=v.why_unknown)

    r = rounds.settle(attempt, reruns)
    print("ATTEMPTS", len(runs))
    _record_unknown(record_property, [r], policy)
    d, v = runs[-1]
    assert_verdict(SimpleNamespace(verdict=v, run_dir=d), "entry", policy, r.reruns)
""",
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path, PROJECT)


def _run(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_pytest(project, "-p", "no:cacheprovider", "-p", "no:xdist", "-s", "scenarios", *args)


def test_an_inconclusive_entry_fails_the_session_and_says_why(project: Path) -> None:
    p = _run(project)
    out = p.stdout
    assert p.returncode == 1, out[-3000:] + p.stderr[-2000:]
    assert "ATTEMPTS 2" in out  # the default: one re-run of an unknown verdict
    assert "entry: inconclusive (after 1 re-run(s)): at_least_once: the checker crashed" in out, out[-3000:]
    assert "inconclusive: 1 (each a failure); 1 re-run(s) of an unknown verdict" in out, out[-3000:]


def test_skip_is_an_explicit_opt_in_counted_in_the_summary(project: Path) -> None:
    p = _run(project, "--bfh-unknown=skip", "--bfh-rerun-unknown", "0")
    out = p.stdout
    assert p.returncode == 0, out[-3000:] + p.stderr[-2000:]
    assert "ATTEMPTS 1" in out and "1 skipped" in out
    assert "inconclusive: 1 (1 skipped by --bfh-unknown=skip); 0 re-run(s) of an unknown verdict" in out


def test_a_bad_rerun_count_is_a_usage_error(project: Path) -> None:
    p = _run(project, "--bfh-rerun-unknown", "-1")
    assert p.returncode == 4 and "--bfh-rerun-unknown" in p.stderr, p.stderr[-2000:]


# -- the rule itself (harness/run/rounds.py) ------------------------------------------------------
def _verdicts(*vs: str):
    seq = iter(vs)
    tried: list[int] = []

    def one(k: int) -> rounds.Round:
        tried.append(k)
        return rounds.Round(0, next(seq), None, why="recovery: machine overloaded")

    return one, tried


def test_settle_reruns_only_an_unknown_verdict_and_counts_the_reruns() -> None:
    one, tried = _verdicts("unknown", "pass")
    r = rounds.settle(one, 3)
    assert (r.verdict, r.reruns, tried) == ("pass", 1, [0, 1])
    one, tried = _verdicts("fail", "pass")
    assert rounds.settle(one, 3).verdict == "fail" and tried == [0]  # a fail is never re-run
    one, tried = _verdicts("unknown", "unknown", "unknown")
    r = rounds.settle(one, 2)
    assert (r.verdict, r.reruns, tried) == ("unknown", 2, [0, 1, 2])
    assert rounds.inconclusive_line(r.why, r.reruns) == (
        "inconclusive (after 2 re-run(s)): recovery: machine overloaded"
    )


def test_rounds_count_an_inconclusive_round_as_a_failure_unless_skipped() -> None:
    def tally(policy: str) -> rounds.Tally:
        vs = ["pass", "unknown", "pass"]
        return rounds.repeat("e", 3, lambda i: rounds.Round(i, vs[i], None, why="why"), policy)

    t = tally("fail")
    assert t.failures == 1 and t.first_failure is not None and t.first_failure.index == 1
    assert "inconclusive: why" in t.message() and "1 inconclusive, failed as such" in t.line()
    s = tally("skip")
    assert s.failures == 0 and s.skipped == 1 and "1 inconclusive, skipped" in s.line()
    assert s.to_dict()["skipped"] == 1
