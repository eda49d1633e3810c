"""--rounds: failures of N and the 95 % upper bound on the failure probability (harness/run/rounds.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from harness.run.rounds import Round, Tally, binom_cdf, repeat, upper_bound


@pytest.mark.parametrize("n", [1, 3, 5, 20, 100])
def test_no_failure_bound_is_the_closed_form(n):
    assert upper_bound(0, n) == pytest.approx(1 - 0.05 ** (1 / n), abs=1e-9)
    assert upper_bound(0, n) <= 3 / n + 1e-9 or n < 20  # "about 3/N"


@pytest.mark.parametrize(("k", "n", "want"), [(1, 5, 0.6574), (2, 10, 0.5069), (1, 20, 0.2161)])
def test_clopper_pearson_upper_bound(k, n, want):
    """Published one-sided 95 % Clopper-Pearson bounds; the CDF at the bound is 5 %."""
    p = upper_bound(k, n)
    assert p == pytest.approx(want, abs=5e-4)
    assert binom_cdf(k, n, p) == pytest.approx(0.05, abs=1e-6)
    assert upper_bound(n, n) == 1.0


def test_binomial_cdf_sums_to_one():
    assert binom_cdf(10, 10, 0.3) == pytest.approx(1.0)
    assert binom_cdf(0, 4, 0.5) == pytest.approx(1 / 16)
    assert math.isclose(binom_cdf(2, 5, 0.0), 1.0)


def test_bad_counts_are_refused():
    with pytest.raises(ValueError):
        upper_bound(3, 2)
    with pytest.raises(ValueError):
        repeat("x", 0, lambda i: Round(i, "pass", None))


def test_first_failing_round_heads_the_message(tmp_path: Path):
    verdicts = ["pass", "fail", "pass", "fail", "pass"]
    tally = repeat(
        "pause-master",
        5,
        lambda i: Round(
            i, verdicts[i], tmp_path / f"r{i}", f"bfh run pause-master --seed {i}", f"broken {i}"
        ),
    )
    assert tally.failures == 2
    first, replay = tally.message().splitlines()[:2]
    assert first == f"first failing round 2: run folder {tmp_path / 'r1'}"
    assert replay.strip() == "replay: bfh run pause-master --seed 1"
    assert "2 of 5 rounds failed" in tally.message() and "broken 1" in tally.message()
    d = tally.to_dict()
    assert d["failures"] == 2 and d["failure_p_upper95"] == pytest.approx(upper_bound(2, 5), abs=1e-4)
    assert dict(tally.properties())["first_failing_run"] == str(tmp_path / "r1")
    green = Tally("masterslave", [Round(i, "pass", None) for i in range(3)])
    assert (
        green.message()
        == "masterslave: 0 of 3 rounds failed; failure probability < 63.2 % (95 % upper bound)"
    )


def test_replay_command_drops_rounds_and_seed():
    from harness.cli.main import _without_rounds

    argv = ["run", "pause-master", "--rounds", "5", "--seed=3", "--agent-cmd", "my agent {config}"]
    assert _without_rounds(argv) == ["run", "pause-master", "--agent-cmd", "'my agent {config}'"]


def test_each_validate_round_gets_its_own_junit_file() -> None:
    from harness.cli.common import round_path

    assert round_path(Path("out/cov.xml"), 2) == Path("out/cov.round-2.xml")
    assert round_path(Path("out/cov.xml"), 1) != round_path(Path("out/cov.xml"), 2)
