"""Tolerances: a default per kind of measure, overridden in the project's pyproject.toml."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.compare import tolerance
from harness.compare.tolerance import Tolerance, ToleranceError
from harness.contracts.scorecard import MEASURES


def test_every_known_measure_has_a_kind() -> None:
    kinds = {name: tolerance.default(name)[0] for name in MEASURES}
    assert kinds["recovery_s"] == kinds["takeover_to_delivery_s"] == kinds["storm_all_back_s"] == "duration"
    assert kinds["failed_attempts_per_s"] == kinds["storm_attempts_per_role_s"] == "rate"
    assert kinds["duplicates"] == kinds["dropped_at_timeout"] == "count"
    assert kinds["publish_latency_p95_s"] == "publish latency"
    assert kinds["retry_pause_max_s"] == "pause"  # the agent's own sleep: 25 % or 0.1 s, not 0.5 s
    assert tolerance.default("retry_pause_max_s[publisher]")[1] == Tolerance(0.25, 0.1)
    assert tolerance.default("recovery_s[subscriber:orders]") == tolerance.default("recovery_s")


def test_the_larger_of_relative_and_absolute() -> None:
    t = Tolerance(0.25, 0.5)
    assert t.allowance(1.0) == 0.5  # a fast measure: half a second
    assert t.allowance(8.0) == 2.0  # a slow one: a quarter
    assert t.text() == "+25 % or +0.5"


def test_the_nearest_pyproject_overrides_the_defaults(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.bfh.compare.tolerance]\nrecovery_s = { relative = 0.5 }\nduplicates = { absolute = 0 }\n"
    )
    (tmp_path / "sub").mkdir()
    t = tolerance.load(tmp_path / "sub")
    assert t.source == str(tmp_path / "pyproject.toml")
    assert t.of("recovery_s") == Tolerance(0.5, 0.5)  # absolute kept from the default
    assert t.of("duplicates") == Tolerance(0.25, 0.0)
    assert t.of("takeover_to_delivery_s") == tolerance.default("takeover_to_delivery_s")[1]


def test_a_project_without_the_table_keeps_the_defaults(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert tolerance.load(tmp_path).overrides == {}


@pytest.mark.parametrize(
    ("table", "why"),
    [
        ("recovery_s = 0.5", "want a table"),
        ("recovery_s = { relative = -1 }", "relative must be a number >= 0"),
        ('recovery_s = { absolute = "1s" }', "absolute must be a number >= 0"),
        ("recovery_s = { percent = 5 }", "unknown key(s) percent"),
        ("recovery_ss = { relative = 0.5 }", "no such measure; Fix: did you mean recovery_s?"),
        ('"recovery_sx[publisher]" = { relative = 0.5 }', "no such measure; Fix: did you mean recovery_s?"),
    ],
)
def test_a_bad_tolerance_is_one_clear_error(tmp_path: Path, table: str, why: str) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.bfh.compare.tolerance]\n{table}\n")
    with pytest.raises(ToleranceError, match="recovery_s") as e:
        tolerance.load(tmp_path)
    assert why in str(e.value) and "\n" not in str(e.value)


def test_a_measure_named_with_its_role_is_known(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.bfh.compare.tolerance]\n"recovery_s[publisher]" = { relative = 0.5 }\n'
    )
    assert tolerance.load(tmp_path).of("recovery_s[publisher]") == Tolerance(0.5, 0.5)
