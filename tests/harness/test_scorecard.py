"""The scorecard (bfh-scorecard/1): the schema's round trip and located errors, the rounds built
from judged run folders, and the plugin session that writes one (pure: hand-written run folders)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from harness.contracts.scorecard import (
    MEASURES,
    SCHEMA,
    Round,
    Scorecard,
    ScorecardError,
    base_name,
    load_scorecard,
    parse,
    role_of,
    save,
)
from harness.verdict.scorecard import entry_of, round_from_run, run_folders, scorecard_from_runs
from tests.harness.pluginproject import run_pytest, write_project

LOAD = {"load1_max": 3.5, "probe": {"max_s": 0.04, "p99_s": 0.01}, "brokers": {"max_s": 0.2}}


def _card() -> Scorecard:
    card = Scorecard(source="pytest", harness_version="0.1.0")
    card.add_round(
        "masterslave",
        Round(
            run_id="r1",
            seed=1,
            verdict="pass",
            promises={"recovery": "pass"},
            measures={"recovery_s[publisher]": [1.25, 0.5]},
        ),
    )
    return card


def test_round_trip(tmp_path: Path) -> None:
    path = save(_card(), tmp_path / "sub" / "scorecard.json")
    data = json.loads(path.read_text())
    assert data["schema"] == SCHEMA and data["entries"][0]["entry"] == "masterslave"
    assert load_scorecard(path) == _card().model_copy(update={"created": load_scorecard(path).created})


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda d: d["entries"][0]["rounds"][0].update(seed="one"), "entries[0].rounds[0].seed"),
        (lambda d: d["entries"][0]["rounds"][0]["measures"].update(x=["a"]), "measures.x[0]"),
        (lambda d: d.update(source="make"), "source"),
        (lambda d: d["entries"][0].update(extra=1), "entries[0].extra"),
        (lambda d: d.update(schema="bfh-scorecard/2"), "schema 'bfh-scorecard/2'"),
    ],
)
def test_a_bad_field_is_named(change: Any, where: str) -> None:
    data = json.loads(_card().to_json())
    change(data)
    with pytest.raises(ScorecardError, match="^scorecard: .*" + re.escape(where)):
        parse(data)


def test_a_file_that_is_no_scorecard_is_named(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(ScorecardError, match="x.json: not JSON"):
        load_scorecard(tmp_path / "x.json")
    with pytest.raises(ScorecardError, match="cannot be read"):
        load_scorecard(tmp_path / "absent.json")


def test_measure_names() -> None:
    assert base_name("recovery_s[subscriber:orders]") == "recovery_s" in MEASURES
    assert role_of("recovery_s[subscriber:orders]") == "subscriber:orders" and role_of("duplicates") is None


def _run(root: Path, name: str, scenario: str, topology: str = "pair", judged: bool = True) -> Path:
    d = root / name
    (d / "analysis").mkdir(parents=True)
    run = {
        "run": name,
        "seed": 7,
        "scenario": {"name": scenario},
        "topology": {"name": topology},
        "agents": [{"name": "a1", "command": "my-agent --config {config}"}],
        "observations": {"load": LOAD},
    }
    (d / "run.json").write_text(json.dumps(run))
    if judged:
        checks = [
            {"promise": "recovery", "status": "pass", "measures": {"recovery_s[publisher]": [2.5]}},
            {"promise": "policy", "status": "fail", "measures": {"duplicates": [3]}},
            {"promise": "liveness", "status": "n/a"},
        ]
        (d / "analysis" / "verdict.json").write_text(json.dumps({"verdict": "fail", "checks": checks}))
    return d


def test_a_round_from_a_judged_run(tmp_path: Path) -> None:
    r = round_from_run(_run(tmp_path, "run-1", "masterslave"))
    assert (r.run_id, r.seed, r.verdict) == ("run-1", 7, "fail")
    assert r.promises == {"recovery": "pass", "policy": "fail", "liveness": "n/a"}
    assert r.measures == {"recovery_s[publisher]": [2.5], "duplicates": [3.0]}
    assert (r.load.load_avg_max, r.load.sched_delay_max_s, r.load.broker_answer_max_s) == (3.5, 0.04, 0.2)
    never = round_from_run(_run(tmp_path, "run-2", "masterslave", judged=False))
    assert never.verdict == "error" and not never.measures


def test_entries_and_folders_of_folders(tmp_path: Path) -> None:
    _run(tmp_path, "a", "masterslave")
    _run(tmp_path, "b", "network", "network-of-pairs")
    _run(tmp_path / "deeper", "c", "validate:kill:g1", "my-topology")
    assert [entry_of(d) for d in run_folders(tmp_path)] == [
        "masterslave",
        "network@network-of-pairs",
        "validate:kill:g1",
    ]
    card = scorecard_from_runs(tmp_path, agent_version="2.4.1")
    assert card.agent.version == "2.4.1" and card.agent.command == "my-agent --config {config}"
    assert len(card.agent.command_sha256) == 64 and len(card.entries) == 3
    assert scorecard_from_runs([tmp_path / "a", tmp_path / "a"]).entries[0].rounds[1].run_id == "a"
    with pytest.raises(ScorecardError, match="no run folder"):
        run_folders(tmp_path / "deeper" / "c" / "analysis")


PLUGIN_TEST = """
import json
import re
from pathlib import Path


def test_one(record_property, tmp_path):
    d = Path(%r) / "run-1"
    (d / "analysis").mkdir(parents=True, exist_ok=True)
    (d / "run.json").write_text(json.dumps({"run": "run-1", "seed": 1, "scenario": {"name": "masterslave"}}))
    checks = [{"promise": "recovery", "status": "pass", "measures": {"recovery_s[publisher]": [1.5]}}]
    (d / "analysis" / "verdict.json").write_text(json.dumps({"verdict": "pass", "checks": checks}))
    record_property("run_dirs", json.dumps([str(d)]))
"""


def test_a_plugin_session_writes_its_scorecard(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p", {"test_x.py": PLUGIN_TEST % str(tmp_path / "runs")})
    p = run_pytest(project, "-p", "no:xdist", "--bfh-reports", "out", "--bfh-agent-version", "9.9")
    assert p.returncode == 0, p.stdout + p.stderr
    card = load_scorecard(project / "out" / "scorecard.json")
    assert card.source == "pytest" and card.agent.version == "9.9"
    assert card.entries[0].rounds[0].measures == {"recovery_s[publisher]": [1.5]}
    assert "scorecard: " in p.stdout
    bad = run_pytest(project, "-p", "no:xdist", "--bfh-scorecard", "sc.json", "--bfh-baseline", "absent.json")
    assert bad.returncode == pytest.ExitCode.USAGE_ERROR, bad.stdout + bad.stderr
    assert "--bfh-baseline: absent.json: cannot read (No such file or directory)" in bad.stderr
    assert not (project / "sc.json").exists()  # refused before anything ran


ROUNDS_TEST = """
import json
from pathlib import Path


def test_rounds(record_property):
    dirs = []
    for seed in range(1, 6):
        d = Path(%r) / f"run-{seed}"
        (d / "analysis").mkdir(parents=True, exist_ok=True)
        run = {"run": d.name, "seed": seed, "scenario": {"name": "masterslave"}}
        (d / "run.json").write_text(json.dumps(run))
        measures = {"recovery_s[publisher]": [4.0 + seed / 10]}
        checks = [{"promise": "recovery", "status": "pass", "measures": measures}]
        (d / "analysis" / "verdict.json").write_text(json.dumps({"verdict": "pass", "checks": checks}))
        dirs.append(str(d))
    record_property("run_dirs", json.dumps(dirs))
"""


def _baseline(path: Path, recovery: float) -> Path:
    card = Scorecard(source="pytest")
    for seed in range(1, 6):
        measures = {"recovery_s[publisher]": [recovery + seed / 10]}
        promises = {"recovery": "pass"}
        rnd = Round(run_id=f"old-{seed}", seed=seed, verdict="pass", promises=promises, measures=measures)
        card.add_round("masterslave", rnd)
    return save(card, path)


def test_a_regression_against_the_baseline_fails_the_session(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p", {"test_x.py": ROUNDS_TEST % str(tmp_path / "runs")})
    same_as_new = _baseline(tmp_path / "same.json", 4.0)
    same = run_pytest(project, "-p", "no:xdist", "--bfh-baseline", str(same_as_new))
    assert same.returncode == 0, same.stdout + same.stderr
    assert "bfh compare (--bfh-baseline)" in same.stdout
    better = _baseline(tmp_path / "better.json", 0.01)  # the old release recovered in 10 ms
    worse = run_pytest(project, "-p", "no:xdist", "--bfh-baseline", str(better))
    assert worse.returncode == 1, worse.stdout + worse.stderr
    section = worse.stdout[worse.stdout.index("bfh compare (--bfh-baseline)") :]
    assert "regression: masterslave recovery_s" in section and "worse" in section, section
    assert "1 passed" in worse.stdout  # every promise kept: the comparison alone fails it


def test_bfh_run_and_validate_write_theirs(tmp_path: Path) -> None:
    import argparse

    from harness.cli.common import write_scorecard

    runs = [_run(tmp_path, "a", "masterslave"), _run(tmp_path, "b", "validate:kill:g1", "mine")]
    args = argparse.Namespace(cmd="validate", reports=str(tmp_path / "r"), scorecard=None, agent_version="3")
    write_scorecard(args, [*runs, None])
    card = load_scorecard(tmp_path / "r" / "scorecard.json")
    assert card.source == "bfh validate" and card.agent.version == "3" and len(card.entries) == 2
    args = argparse.Namespace(cmd="run", reports=str(tmp_path / "r"), scorecard=str(tmp_path / "x.json"))
    write_scorecard(args, runs[:1])
    assert load_scorecard(tmp_path / "x.json").source == "bfh run"
    write_scorecard(argparse.Namespace(cmd="run", reports=str(tmp_path / "n"), scorecard="none"), runs)
    assert not (tmp_path / "n").exists()


def test_a_fifo_baseline_is_a_usage_error_not_a_hang(tmp_path: Path) -> None:
    import os

    project = write_project(tmp_path / "p", {"test_x.py": "def test_x():\n    pass\n"})
    os.mkfifo(tmp_path / "base.json")
    r = run_pytest(project, "-p", "no:xdist", "--bfh-baseline", str(tmp_path / "base.json"))
    assert (
        r.returncode == 4
        and "--bfh-baseline" in r.stdout + r.stderr
        and "regular file" in r.stdout + r.stderr
    )
