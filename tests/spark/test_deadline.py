"""Every stage of the reconcile has a deadline (issue 60): a stage past it has its Spark jobs
cancelled and the job ends in one line naming the stage, never a silent wait; the folder
reconciles again afterwards."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from spark_analysis import reconcile as rc

pytestmark = pytest.mark.spark

RUN = Path(__file__).resolve().parents[1] / "fixtures/rejudge/20261126-144907-masterslave-fb73"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    d = tmp_path / RUN.name
    shutil.copytree(RUN, d)
    shutil.rmtree(d / "analysis", ignore_errors=True)
    return d


def test_a_stage_past_its_deadline_ends_in_one_line_naming_it(
    spark, run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BFH_RECONCILE_STAGE_S", "0.001")
    with pytest.raises(
        rc.DeadlineError, match=r"the reconcile's '(stage|facts|messages|aggregates|output)' stage"
    ):
        rc.reconcile([run], spark=spark)
    assert not (run / "analysis/summary.json").exists()
    # the command line: exit 2, one line, no traceback
    assert rc.main(["--quiet", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "passed its 0.001 s deadline" in err[0], err
    # the folder is judgeable later: with the default deadline it reconciles
    monkeypatch.delenv("BFH_RECONCILE_STAGE_S")
    (summary,) = rc.reconcile([run], spark=spark)
    assert summary["deliveries"]["expected"] > 0
    assert (run / "analysis/summary.json").exists()
