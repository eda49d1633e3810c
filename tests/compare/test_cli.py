"""`bfh compare OLD NEW`: exit codes and every output, on hand-made scorecards (no brokers)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.cli.main import main
from tests.cli.support import bfh
from tests.compare.cards import REF, SLOW, card, recovery


def write(path: Path, data: dict) -> str:
    path.write_text(json.dumps(data))
    return str(path)


@pytest.fixture
def cards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.chdir(tmp_path)  # no pyproject.toml above: the default tolerances
    lat = {"publish_latency_p95_s": lambda i: [0.02 + 0.001 * i]}
    return {
        "ref": write(tmp_path / "ref.json", card(recovery(REF, **lat))),
        "again": write(
            tmp_path / "again.json", card(recovery([x + 0.05 for x in REF], **lat), version="1.1")
        ),
        "slow": write(tmp_path / "slow.json", card(recovery(SLOW, **lat), version="2.0")),
        "two": write(tmp_path / "two.json", card(recovery(REF[:2], **lat))),
        "other": write(tmp_path / "other.json", card(recovery(REF, **lat), entry="stop-master")),
    }


def test_the_same_agent_exits_0(cards: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", cards["ref"], cards["again"]]) == 0
    out = capsys.readouterr().out
    assert "recovery_s" in out and "same" in out and "no regression" in out


def test_a_slower_agent_exits_1_with_the_interval(
    cards: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", cards["ref"], cards["slow"]]) == 1
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "recovery_s" in x)
    assert "worse" in line and "[+" in line  # the difference with its interval
    assert "regression: masterslave recovery_s" in out


def test_too_few_rounds_exit_2_saying_how_many(
    cards: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", cards["two"], cards["two"]]) == 2
    assert "rounds per side are needed" in capsys.readouterr().out


def test_other_entries_exit_2(cards: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", cards["ref"], cards["other"]]) == 2
    assert "different entries" in capsys.readouterr().out


@pytest.mark.parametrize("bad", ["missing.json", "broken.json", "not-a-card.json"])
def test_unreadable_input_is_one_line(
    cards: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "not-a-card.json").write_text('{"schema": "something/1"}')
    out = tmp_path / "out.json"
    assert main(["compare", cards["ref"], str(tmp_path / bad), "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and bad in err and len(err.strip().splitlines()) == 1
    assert not out.exists()  # nothing half-written


def test_a_bad_output_path_writes_nothing(cards: dict[str, str], tmp_path: Path) -> None:
    html = tmp_path / "page.html"
    code = main(
        ["compare", cards["ref"], cards["slow"], "--html", str(html), "--json", str(tmp_path / "no/x.json")]
    )
    assert code == 2 and not html.exists()


def test_json_junit_and_html(cards: dict[str, str], tmp_path: Path) -> None:
    paths = {k: tmp_path / f"out.{k}" for k in ("json", "xml", "html")}
    args = ["--json", str(paths["json"]), "--junitxml", str(paths["xml"]), "--html", str(paths["html"])]
    assert main(["compare", cards["ref"], cards["slow"], *args]) == 1
    data = json.loads(paths["json"].read_text())
    assert data["schema"] == "bfh-compare/1" and data["exit_code"] == 1
    rec = next(m for m in data["measures"] if m["measure"] == "recovery_s")
    assert rec["verdict"] == "worse" and rec["ci"][0] > rec["tolerance"]
    assert data["new"]["agent_version"] == "2.0"
    suite = ET.parse(paths["xml"]).getroot()
    cases = {(c.get("classname"), c.get("name")): c for c in suite.iter("testcase")}
    assert cases[("masterslave", "recovery_s")].find("failure") is not None
    assert cases[("masterslave", "publish_latency_p95_s")].find("failure") is None
    assert suite.get("failures") == "1"
    html = paths["html"].read_text()
    assert html.count("<svg") == 2 and "<script" not in html and "worse" in html


def test_the_installed_command(cards: dict[str, str]) -> None:
    """Through the `bfh` entry point as a user runs it (a child process)."""
    r = bfh("compare", cards["ref"], cards["slow"])
    assert r.returncode == 1, r.stderr
    assert "recovery_s" in r.stdout and "worse" in r.stdout


def test_json_on_stdout(cards: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", cards["ref"], cards["slow"], "--json", "-"]) == 1
    out = capsys.readouterr()
    assert json.loads(out.out)["exit_code"] == 1 and "recovery_s" in out.err


FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "rejudge" / "20261126-144907-masterslave-fb73"


def _judged_copies(tmp_path: Path, side: str, n: int) -> Path:
    """A folder of `n` judged copies of the masterslave fixture (one run, one seed: n rounds)."""
    import shutil

    from harness.verdict import judge

    for i in range(n):
        run = tmp_path / side / f"{FIXTURE.name}-{i}"
        shutil.copytree(FIXTURE, run)
        judge(run)  # the scorecard is read from analysis/verdict.json
    return tmp_path / side


def test_run_folders_as_sides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Folders of judged run folders (the masterslave fixture, three rounds a side): the same
    values in every round of both sides are the same."""
    monkeypatch.chdir(tmp_path)
    old, new = _judged_copies(tmp_path, "old", 3), _judged_copies(tmp_path, "new", 3)
    assert main(["compare", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "takeover_to_delivery_s" in out and "no regression" in out


def test_one_judged_round_a_side_cannot_be_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One run folder against the same: too few judged rounds to pass anything (exit 2)."""
    monkeypatch.chdir(tmp_path)
    old = _judged_copies(tmp_path, "old", 1)
    assert main(["compare", str(old), str(old)]) == 2
    out = capsys.readouterr().out
    assert "cannot compare" in out and "1 judged round(s) of 1" in out and "no regression" not in out
