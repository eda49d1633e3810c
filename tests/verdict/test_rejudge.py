"""Run folders made by the code before the verdict owned the limits (commit 058f9e8: Spark wrote
`reasons`/`warnings`, the judge rewrote summary.json) keep their verdicts under the new judge.

tests/fixtures/rejudge/ holds four runs of a soak of `pytest scenarios/ -k masterslave` (round 4),
cut to what the judge reads and the manifest seals (no broker data, jars or configs). EXPECTED is
what the old judge decided, from each folder's analysis/summary.json as the old code left it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.cli.main import main as bfh
from harness.verdict.checks import PROMISES, Promise

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "rejudge"
#: folder -> (verdict, broken promises) as the old code judged it
EXPECTED: dict[str, tuple[str, list[str]]] = {
    "20261126-144907-masterslave-fb73": ("pass", []),
    "20261126-144958-pause-master-dd38": ("pass", []),
    "20261126-144957-both-down-long-d119": ("fail", ["consumer_confirmed"]),
    "20261126-145041-one-connection-cut-e32f": ("pass", []),
}
#: deliberate verdict changes made after the soak, by commit: folder -> (verdict, broken, the
#: one promise whose result changed). de09c4c (issue 35): consumer_confirmed's claim in the
#: observer's first replay second is `unknown` unless a consumer is seen: round 4's false flag.
LATER: dict[str, tuple[str, list[str], str]] = {
    "20261126-144957-both-down-long-d119": ("pass", [], "consumer_confirmed"),
}
EXIT = {"pass": 0, "fail": 1, "unknown": 2}


def _now(name: str) -> tuple[str, list[str]]:
    """The verdict the judge gives today: the old one unless a later commit changed it on purpose."""
    if name in LATER:
        return LATER[name][0], LATER[name][1]
    return EXPECTED[name]


def _same_checks(old: dict[str, Any], new: dict[str, Any], name: str) -> None:
    """Every promise the old judge checked has the same status now (but a deliberate change)."""
    now = {c["promise"]: c["status"] for c in new["checks"]}
    changed = {LATER[name][2]} if name in LATER else set()
    diff = {c["promise"] for c in old["checks"] if now.get(c["promise"]) != c["status"]}
    assert diff == changed, (name, diff)
    assert now.get("applicable") == "pass"


def _copy(name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / name, tmp_path / name))


def _verdict(run_dir: Path) -> dict[str, Any]:
    out: dict[str, Any] = json.loads((run_dir / "analysis" / "verdict.json").read_text(encoding="utf-8"))
    return out


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_fixtures_record_what_the_old_judge_decided() -> None:
    """EXPECTED is read from the folders, not made up: the old judge wrote it into summary.json."""
    for name, (verdict, broken) in EXPECTED.items():
        old = json.loads((FIXTURES / name / "analysis" / "summary.json").read_text(encoding="utf-8"))
        assert (old["verdict"], old["broken"]) == (verdict, broken), name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_rejudged_by_the_new_judge_the_verdict_stands(name: str, tmp_path: Path) -> None:
    run_dir = _copy(name, tmp_path)
    summary = run_dir / "analysis" / "summary.json"
    before = _sha(summary)
    verdict, broken = _now(name)
    assert bfh(["judge", str(run_dir)]) == EXIT[verdict]
    saved = _verdict(run_dir)
    assert (saved["verdict"], saved["broken"]) == (verdict, broken)
    _same_checks(json.loads(summary.read_text(encoding="utf-8")), saved, name)
    assert _sha(summary) == before, "the judge leaves the reconciliation's summary.json alone"


def test_a_raising_checker_makes_the_verdict_unknown_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As Jepsen's check-safe: a gated checker that raises is `unknown` with the error as its
    evidence, and the run's verdict is `unknown` (exit 2), never a pass."""
    run_dir = _copy("20261126-144907-masterslave-fb73", tmp_path)

    def boom(v: Any) -> Any:
        raise ZeroDivisionError("a record no checker expected")

    # the registry's data: at_least_once (gated on this run) now raises
    monkeypatch.setitem(PROMISES, "at_least_once", Promise("at_least_once", "raises", boom))
    assert bfh(["judge", str(run_dir)]) == 2
    saved = _verdict(run_dir)
    assert saved["verdict"] == "unknown" and saved["broken"] == []
    row = next(c for c in saved["checks"] if c["promise"] == "at_least_once")
    assert row["status"] == "unknown" and row["gated"]
    assert "ZeroDivisionError: a record no checker expected" in row["detail"]
    shown = capsys.readouterr()
    assert "UNKNOWN at_least_once" in shown.out + shown.err and "PASS" not in shown.out + shown.err


def test_a_raising_ungated_checker_does_not_decide(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """broker_consumers is reported only: its crash is shown, the verdict stays the run's."""
    run_dir = _copy("20261126-144907-masterslave-fb73", tmp_path)

    def boom(v: Any) -> Any:
        raise KeyError("broker")

    monkeypatch.setitem(PROMISES, "broker_consumers", Promise("broker_consumers", "raises", boom))
    assert bfh(["judge", str(run_dir)]) == 0
    row = next(c for c in _verdict(run_dir)["checks"] if c["promise"] == "broker_consumers")
    assert row["status"] == "unknown" and not row["gated"]


@pytest.mark.spark
def test_reconciled_again_by_the_new_spark_the_verdict_stands(tmp_path: Path) -> None:
    """A fresh reconciliation (counts and evidence only, no `reasons`) gives the old counts, and
    the judge the same verdict as on the old summary."""
    names = ["20261126-144957-both-down-long-d119", "20261126-144907-masterslave-fb73"]
    dirs = [_copy(n, tmp_path) for n in names]
    old_policy = json.loads((dirs[0] / "analysis" / "summary.json").read_text(encoding="utf-8"))["policy"]
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(old_policy), encoding="utf-8")
    assert bfh(["reconcile", *map(str, dirs), "--policy", str(policy)]) == 0
    for name, run_dir in zip(names, dirs, strict=True):
        fresh = json.loads((run_dir / "analysis" / "summary.json").read_text(encoding="utf-8"))
        assert "reasons" not in fresh and "verdict" not in fresh and "examples" in fresh
        old = json.loads((FIXTURES / name / "analysis" / "summary.json").read_text(encoding="utf-8"))
        for key in ("totals", "deliveries", "ghosts", "unexpected"):  # the same counts
            assert fresh[key] == old[key], (name, key)
        verdict, broken = _now(name)
        assert bfh(["judge", str(run_dir)]) == EXIT[verdict]
        saved = _verdict(run_dir)
        assert (saved["verdict"], saved["broken"]) == (verdict, broken), name
