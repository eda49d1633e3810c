"""`bfh compare` on inputs that do not belong (issue 59): sides never judged, measures that are
Infinity or NaN, run folders holding another run's verdict or altered evidence, a FIFO, /dev/zero
or a huge file as a side. Each is `cannot compare` (exit 2) or the right verdict, never `no
regression`."""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.compare import WORSE, CompareError, compare
from tests.cli.support import bfh
from tests.compare.cards import REF, SLOW, card, recovery
from tests.compare.test_cli import FIXTURE

INF = math.inf


def _error_rounds(n: int) -> dict:
    c = card([{}] * n, promises=[{}] * n)
    for r in c["entries"][0]["rounds"]:
        r["verdict"] = "error"
    return c


def test_two_never_judged_sides_cannot_be_compared() -> None:
    c = compare(_error_rounds(5), _error_rounds(5))
    assert c.exit_code == 2
    assert c.summary().startswith("cannot compare") and "0 judged round(s) of 5" in c.summary()


def test_a_side_with_too_few_judged_rounds_cannot_be_compared() -> None:
    new = card(recovery(REF))
    for r in new["entries"][0]["rounds"][:3]:
        r["verdict"], r["measures"], r["promises"] = "error", {}, {}
    c = compare(card(recovery(REF)), new)
    assert c.exit_code == 2 and "NEW has 2 judged round(s) of 5" in c.summary()


def test_a_new_side_that_never_recovers_is_worse() -> None:
    c = compare(card(recovery(REF)), card(recovery([INF] * 5)))
    (row,) = c.measures
    assert row.verdict == WORSE and c.exit_code == 1
    assert row.new.rounds == [INF] * 5 and row.shift == INF
    assert row.to_dict()["new"]["never_reached"] == 5


@pytest.mark.parametrize(
    "old,new",
    [
        ([INF] * 5, [INF] * 5),  # never recovered on either side: not `same`
        (REF, [*REF[:4], INF]),  # once in five: not shown worse, yet no pass
    ],
    ids=["both-never", "new-once"],
)
def test_infinity_on_the_new_side_is_never_no_regression(old: list[float], new: list[float]) -> None:
    c = compare(card(recovery(old)), card(recovery(new)))
    assert c.exit_code == 2, c.summary()
    assert "never reached it (Infinity)" in c.summary() and "no regression" not in c.summary()
    assert all(len(m.new.rounds) == 5 for m in c.measures)  # no round dropped


def test_infinity_on_the_old_side_only_is_kept_as_its_worst_value() -> None:
    c = compare(card(recovery([INF] * 5)), card(recovery(REF)))
    (row,) = c.measures
    assert len(row.old.rounds) == 5 and row.verdict == "better" and c.exit_code == 0


@pytest.mark.parametrize("value", [math.nan, -INF])
def test_nan_is_an_error_naming_its_round(value: float) -> None:
    new = card(recovery(REF))
    new["entries"][0]["rounds"][2]["measures"]["recovery_s[publisher]"] = [value]
    with pytest.raises(CompareError, match=r"NEW: entry masterslave, round run-masterslave-3 .*recovery_s"):
        compare(card(recovery(REF)), new)


def test_infinity_in_a_scorecard_file_through_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "old.json").write_text(json.dumps(card(recovery([INF] * 5))))  # `Infinity` in the JSON
    code = main(["compare", "old.json", "old.json", "--json", "out.json", "--html", "out.html"])
    assert code == 2 and "no regression" not in capsys.readouterr().out
    assert json.loads((tmp_path / "out.json").read_text())["measures"][0]["new"]["never_reached"] == 5
    assert "never reached" in (tmp_path / "out.html").read_text()


# -- run folders: the sealed-evidence checks of `bfh judge` ------------------------------------
def _judged_folder(tmp_path: Path, side: str, n: int = 3) -> Path:
    from harness.verdict import judge

    for i in range(n):
        run = tmp_path / side / f"run-{i}"
        shutil.copytree(FIXTURE, run)
        judge(run)
    return tmp_path / side


def test_a_folder_holding_another_runs_verdict_cannot_be_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    old, new = _judged_folder(tmp_path, "old"), _judged_folder(tmp_path, "new")
    verdict = new / "run-1" / "analysis" / "verdict.json"
    data = json.loads(verdict.read_text())
    verdict.write_text(json.dumps({**data, "run": "20261201-000000-other-0000"}))
    assert main(["compare", str(old), str(new)]) == 2
    err = capsys.readouterr().err
    assert "another run's verdict" in err and len(err.strip().splitlines()) == 1


def test_a_folder_with_altered_evidence_cannot_be_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    old, new = _judged_folder(tmp_path, "old"), _judged_folder(tmp_path, "new")
    with (new / "run-2" / "faults.jsonl").open("a") as f:
        f.write("\n")
    assert main(["compare", str(old), str(new)]) == 2
    assert "altered evidence" in capsys.readouterr().err


def test_a_folder_without_manifest_is_noted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    old = _judged_folder(tmp_path, "old")
    for d in old.iterdir():  # as a run from before manifests: run.json does not say it was sealed
        (d / "manifest.json").unlink()
        run = json.loads((d / "run.json").read_text())
        run.pop("manifest", None)
        (d / "run.json").write_text(json.dumps(run))
    assert main(["compare", str(old), str(old)]) == 0
    assert "3 run folder(s) with no manifest.json: not checked" in capsys.readouterr().out


# -- what is not a scorecard file --------------------------------------------------------------
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge", "symlink-loop"])
def test_a_side_that_is_no_file_is_one_line_without_hanging(tmp_path: Path, kind: str) -> None:
    side = tmp_path / "side.json"
    if kind == "fifo":
        os.mkfifo(side)
    elif kind == "dev-zero":
        side.symlink_to("/dev/zero")
    elif kind == "huge":
        with side.open("wb") as f:  # sparse: 70 MB long, nothing written
            f.truncate(70 << 20)
    else:
        side.symlink_to(side)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(card(recovery(REF))))
    t0 = time.monotonic()
    p = bfh("compare", str(good), str(side), timeout=60)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in p.stderr
    assert time.monotonic() - t0 < 30  # refused, not read (the huge one by its size)


def test_a_huge_scorecard_is_refused_by_size(tmp_path: Path) -> None:
    side = tmp_path / "big.json"
    with side.open("wb") as f:
        f.truncate(70 << 20)
    with pytest.raises(CompareError, match="larger than the 64 MB"):
        compare(card(recovery(SLOW)), side)
