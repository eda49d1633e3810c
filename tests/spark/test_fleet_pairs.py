"""The pairs stage built from rows of matches and receipts (spark_analysis/pairs.py, a fleet's:
issue 44) against the wide one, one row per message (spark_analysis/widepairs.py, which every
fleet run took before): the same summaries and the same listed pairs on generated fleet run
folders, one run per job and two runs in one job."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from spark_analysis.inputs import load_inputs
from spark_analysis.pairs import classify
from spark_analysis.policy import Policy
from spark_analysis.reconcile import run_job
from spark_analysis.testing.fleet import FleetSpec, write_fleet_run
from spark_analysis.widepairs import classify_wide

pytestmark = [pytest.mark.spark, pytest.mark.extended]  # 35 s a case (a cold JVM)


def comparable(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary less what differs between two reconciles of one run (folder, timings)."""
    return {k: v for k, v in summary.items() if k not in ("engine", "run_dir")}


def listed_rows(run_dir: Path) -> pd.DataFrame:
    df = pd.read_parquet(run_dir / "analysis" / "messages.parquet")
    return df.sort_values(["msg_id", "sub_index"], na_position="first").reset_index(drop=True)


def twins(tmp_path: Path, specs: list[FleetSpec]) -> tuple[list[Path], list[Path]]:
    """Each spec's fleet folder, twice (one for each pairs stage)."""
    new, old = [], []
    for i, spec in enumerate(specs):
        d = tmp_path / "new" / f"fleet-{i}"
        write_fleet_run(d, spec)
        o = tmp_path / "old" / d.name
        shutil.copytree(d, o)
        new.append(d)
        old.append(o)
    return new, old


@pytest.mark.parametrize("runs", [1, 2])
def test_fleet_pairs_match_the_wide_layout(spark: Any, tmp_path: Path, runs: int) -> None:
    specs = [
        FleetSpec(members=12, events=40, status=5, seed=3),
        FleetSpec(members=7, events=25, status=3, seed=4),
    ]
    new, old = twins(tmp_path, specs[:runs])
    got = run_job(spark, load_inputs(new), Policy(), classifier=classify)
    want = run_job(spark, load_inputs(old), Policy(), classifier=classify_wide)
    assert [comparable(s) for s in got] == [comparable(s) for s in want]
    for n, o in zip(new, old, strict=True):
        pd.testing.assert_frame_equal(listed_rows(n), listed_rows(o))
    # the generator's seeded anomalies are there (the comparison is not of two empty results)
    d = got[0]["deliveries"]
    assert d["expected"] > 12 * 40 and d["lost"] >= 1 and d["duplicated"] >= 1
    assert d["extra"] > 0 and d["ghost"] > 0 and d["in_doubt_missing"] > 0
