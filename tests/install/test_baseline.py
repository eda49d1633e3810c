"""`pytest --bfh-baseline` in an agent team's repository that only pip-installed the wheel: the
GitHub template's commands (tests/install/test_plugin.py runs them the same way) with the last
release's scorecard in the repository, as docs/ci.md asks a team to keep it.

The baseline is a real one: the reference agent's scorecard of 5 masterslave rounds (seeds 1-5,
REFERENCE, made with `bfh run masterslave --seed 1 --rounds 5` on 2026-11-27, docs/compare.md).
The release under test is the seeded regression slow_backoff (the reference backing off 3x
slower), which keeps every promise: the session fails on the comparison alone, with exit 1 and
the regression on recovery's retry pause in its terminal summary.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.catalog.scenarios import SCENARIOS
from harness.contracts.scorecard import load_scorecard
from tests.install.test_plugin import AGENT, _github, _run_commands, _team_repo
from tests.install.venv import run, venv_env

#: the reference's scorecard of ROUNDS masterslave rounds, seeds 1..ROUNDS (a real baseline)
REFERENCE = Path(__file__).with_name("reference-masterslave.scorecard.json")
ROUNDS = 5  # per side: the fewest that detect slow_backoff among masterslave's measures


@pytest.mark.extended
@pytest.mark.broker
@pytest.mark.timeout(2400)
def test_seeded_regression_fails_the_gate(installed: Path, tmp_path: Path) -> None:
    repo = _team_repo(tmp_path)
    variables, lines, _ = _github()
    baseline = load_scorecard(REFERENCE)
    seed = SCENARIOS["masterslave"].seed
    (entry,) = baseline.entries
    assert entry.entry == "masterslave"
    assert [r.seed for r in entry.rounds] == [seed + i for i in range(ROUNDS)]  # the gate's seeds
    (repo / variables["BFH_BASELINE"]).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(REFERENCE, repo / variables["BFH_BASELINE"])
    env = venv_env(
        installed,
        **{
            **variables,
            "AGENT_CMD": AGENT % "--defect slow_backoff ",
            "BFH_SELECT": "test_scenario and masterslave]",
            "BFH_ROUNDS": str(ROUNDS),
            "BFH_AGENT_VERSION": "2.0.0",
        },
    )
    p = _run_commands(lines, repo, env)["pytest"]
    tail = f"\n{p.stdout[-8000:]}\n{p.stderr[-3000:]}"
    assert p.returncode == 1, f"a regression must fail the session (exit 1){tail}"
    assert "1 passed" in p.stdout, f"every promise kept: the comparison alone fails it{tail}"
    section = p.stdout[p.stdout.index("bfh compare (--bfh-baseline)") :]
    print(section)
    assert "regression: masterslave retry_pause_max_s" in section, section
    card = load_scorecard(repo / "reports" / "scorecard.json")
    assert card.source == "pytest" and card.agent.version == "2.0.0" and card.agent.command_sha256
    (entry,) = card.entries
    assert entry.entry == "masterslave" and len(entry.rounds) == ROUNDS
    assert all(r.verdict == "pass" and r.promises["recovery"] == "pass" for r in entry.rounds), entry
    assert all(any(k.startswith("retry_pause_max_s[") for k in r.measures) for r in entry.rounds), entry
    assert all(r.load.sched_delay_max_s is not None for r in entry.rounds), entry
    size = (repo / "reports" / "scorecard.json").stat().st_size
    print(f"scorecard of {ROUNDS} masterslave rounds: {size} bytes")
    assert size < 64_000, json.dumps(card.model_dump(mode="json", by_alias=True))[:2000]


def test_the_installed_plugin_compares_with_the_baseline(installed: Path, tmp_path: Path) -> None:
    """Fast, no broker: the wheel's plugin and harness.compare from the outside folder, on hand-made
    judged run folders (5 rounds), against a baseline equal to them (exit 0) and a far better one
    (exit 1, the regression named)."""
    from tests.harness.test_scorecard import ROUNDS_TEST
    from tests.harness.test_scorecard import _baseline as five_rounds

    repo = _team_repo(tmp_path)
    (repo / "tests" / "test_judged.py").write_text(ROUNDS_TEST % str(tmp_path / "runs"))
    py = str(installed / "bin" / "python")
    argv = [py, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "tests/test_judged.py"]
    env = venv_env(installed)
    same = run([*argv, "--bfh-baseline", str(five_rounds(tmp_path / "same.json", 4.0))], repo, env)
    assert same.returncode == 0, same.stdout[-4000:] + same.stderr[-2000:]
    where = run([py, "-c", "import harness.compare as c; print(c.__file__)"], repo, env).stdout
    assert str(installed) in where, where  # the wheel's, not this checkout's
    better = five_rounds(tmp_path / "better.json", 0.01)
    worse = run([*argv, "--bfh-baseline", str(better)], repo, env)
    assert worse.returncode == 1, worse.stdout[-4000:] + worse.stderr[-2000:]
    assert "regression: masterslave recovery_s" in worse.stdout, worse.stdout[-4000:]
    assert load_scorecard(repo / "reports" / "scorecard.json").entries[0].entry == "masterslave"


def test_templates_keep_the_last_release_as_the_baseline() -> None:
    from tests.install.test_plugin import _gitlab

    for env, lines, _ in (_github(), _gitlab()):
        gate = next(ln for ln in lines if " pytest " in f" {ln} ")
        assert env["BFH_BASELINE"] and int(env["BFH_ROUNDS"]) >= 5, env
        assert '--bfh-baseline "$BFH_BASELINE"' in gate and "--bfh-scorecard reports/scorecard.json" in gate
        assert '--bfh-agent-version "$BFH_AGENT_VERSION"' in gate and '"$BFH_ROUNDS"' in gate, gate
