"""`bfh run`'s rule for an unknown verdict (harness/cli/common.py `settled`, the pytest plugin's
rule): re-run up to --rerun-unknown times, then one `inconclusive: <why>` line and exit 2, or with
--unknown skip exit 0. The judged runs are stood in for by what each run notes (no broker)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from harness.cli.common import note, rounds, settled


def _once(verdicts: list[str], calls: list[int]) -> Any:
    def once(args: argparse.Namespace) -> int:
        v = verdicts[len(calls)]
        calls.append(1)
        note(args, "e", v, None, "", why="recovery: machine overloaded" if v == "unknown" else "")
        return {"fail": 1, "unknown": 2}.get(v, 0)

    return once


def _args(**kw: Any) -> argparse.Namespace:
    base = dict(rerun_unknown=1, unknown="fail", outcomes=[], rounds=1, scorecard="none", reports="r")
    return argparse.Namespace(**{**base, **kw})


def test_an_unknown_run_is_rerun_then_inconclusive_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[int] = []
    assert settled(_once(["unknown", "unknown"], calls))(_args()) == 2
    assert len(calls) == 2
    err = capsys.readouterr().err
    assert "inconclusive (after 1 re-run(s)): recovery: machine overloaded" in " ".join(err.split())


def test_a_rerun_that_decides_decides(capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[int] = []
    assert settled(_once(["unknown", "pass"], calls))(_args()) == 0 and len(calls) == 2
    assert "inconclusive" not in capsys.readouterr().err
    calls = []
    assert settled(_once(["fail", "pass"], calls))(_args()) == 1 and len(calls) == 1  # never re-run


def test_skip_is_an_opt_in_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[int] = []
    assert settled(_once(["unknown"], calls))(_args(rerun_unknown=0, unknown="skip")) == 0
    assert "(skipped: --unknown skip)" in capsys.readouterr().err


def test_an_inconclusive_round_fails_the_rounds(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[int] = []
    args = _args(rounds=2, seed=1, json=False, reports=str(tmp_path), rerun_unknown=0)
    assert rounds(args, settled(_once(["pass", "unknown"], calls))) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "e: 1 of 2 rounds failed" in err and "1 inconclusive, failed as such" in err, err
