"""A real gate session writes its scorecard: the masterslave entry (real brokers, fault proxy,
reference agent, Spark) through the plugin, its round's promises and measures, the same as a
re-judge of the run folder gives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.contracts.scorecard import load_scorecard
from harness.verdict import judge
from harness.verdict.scorecard import round_from_run
from tests.harness.pluginproject import ROOT


@pytest.mark.extended
@pytest.mark.broker
@pytest.mark.spark
@pytest.mark.timeout(900)
def test_a_gate_session_writes_the_measures_of_its_run(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "BFH_WORKERS"))}
    env["PYTHONPATH"] = str(ROOT)
    argv = ["-p", "harness.pytest_plugin.plugin", "-p", "no:xdist", "-p", "no:cacheprovider"]
    argv += ["--bfh-scenarios", "masterslave", "--bfh-reports", "reports", "--bfh-agent-version", "ref"]
    p = subprocess.run(
        [sys.executable, "-m", "pytest", *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=850,
        check=False,
    )
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-2000:]
    card = load_scorecard(tmp_path / "reports" / "scorecard.json")
    (entry,) = card.entries
    (rnd,) = entry.rounds
    assert entry.entry == "masterslave" and rnd.verdict == "pass" and card.agent.version == "ref"
    assert rnd.promises["recovery"] == "pass" and rnd.promises["at_least_once"] == "pass"
    names = set(rnd.measures)
    assert {"takeover_to_delivery_s", "publish_latency_p50_s", "duplicates"} <= names, names
    assert any(n.startswith("recovery_s[") for n in names), names
    assert all(0 <= x < 60 for n in names if n.endswith("_s") for x in rnd.measures[n]), rnd.measures
    run_dir = next((tmp_path / "reports").glob("*/run.json")).parent
    judge(run_dir)  # a re-judge from disk writes the same measures
    assert round_from_run(run_dir).measures == rnd.measures
