"""`pytest --bfh-baseline` in an agent team's repository that only pip-installed the wheel: the
GitHub template's commands (tests/install/test_plugin.py runs them the same way) with the last
release's scorecard in the repository, as docs/ci.md asks a team to keep it.

The baseline is crafted far better than any real run (recovery 0.01 s in every round), so the
reference agent's rounds, which keep every promise, are flagged worse on recovery and the session
fails with exit 1 and the comparison in its terminal summary. (The seeded regression agents
against the reference are the seeded helper's tests, tests of harness/compare.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.catalog.scenarios import SCENARIOS
from harness.contracts.scorecard import Agent, Round, Scorecard, load_scorecard, save
from tests.install.test_plugin import AGENT, _github, _run_commands, _team_repo
from tests.install.venv import run, venv_env

ROUNDS = 4  # 4 + 4 rounds: the rank test's smallest p is 1/70, below 0.05 for a family of up to 3


def _baseline(path: Path, entry: str, seeds: list[int]) -> Path:
    card = Scorecard(source="pytest", agent=Agent(version="1.0.0"))
    for seed in seeds:
        measures = {"recovery_s[publisher]": [0.01], "recovery_s[subscriber:orders]": [0.01]}
        card.add_round(entry, Round(run_id=f"old-{seed}", seed=seed, verdict="pass", measures=measures))
    return save(card, path)


@pytest.mark.extended
@pytest.mark.broker
@pytest.mark.timeout(2400)
def test_baseline_regression_fails_the_gate(installed: Path, tmp_path: Path) -> None:
    repo = _team_repo(tmp_path)
    variables, lines, _ = _github()
    seed = SCENARIOS["masterslave"].seed
    _baseline(repo / variables["BFH_BASELINE"], "masterslave", [seed + i for i in range(ROUNDS)])
    env = venv_env(
        installed,
        **{
            **variables,
            "AGENT_CMD": AGENT % "",
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
    assert "regression: masterslave recovery_s" in section, section
    card = load_scorecard(repo / "reports" / "scorecard.json")
    assert card.source == "pytest" and card.agent.version == "2.0.0" and card.agent.command_sha256
    (entry,) = card.entries
    assert entry.entry == "masterslave" and len(entry.rounds) == ROUNDS
    assert all(r.verdict == "pass" and r.promises["recovery"] == "pass" for r in entry.rounds), entry
    assert all(any(k.startswith("recovery_s[") for k in r.measures) for r in entry.rounds), entry
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
