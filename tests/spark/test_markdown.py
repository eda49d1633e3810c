"""analysis/report.md's recovery lines: a few roles one by one, a fleet's folded (pure logic)."""

from __future__ import annotations

from spark_analysis.markdown import LISTED_ROLES, _recovery


def test_a_few_roles_are_listed_one_by_one() -> None:
    line = _recovery({"pub-1": {"publisher": 1.5}, "sub-a": {"subscriber:t/#": None}})
    assert line == "pub-1/publisher=1.500 sub-a/subscriber:t/#=–"


def test_a_fleet_folds_to_its_spread_and_slowest() -> None:
    rec = {f"fleet-{i:04d}": {"subscriber:t/#": float(i), "publisher": None} for i in range(1, 1001)}
    line = _recovery(rec)
    assert line.startswith("1000 of 2000 roles with a success after it (– for 1000): ")
    assert "p50 500.000, p95 950.000, max 1000.000" in line
    assert "slowest: fleet-1000/subscriber:t/#=1000.000, fleet-0999/" in line
    assert "fleet-0001" not in line and len(line) < 600


def test_a_fleet_with_no_role_back_says_so() -> None:
    rec = {f"a{i}": {"publisher": None} for i in range(LISTED_ROLES + 1)}
    assert _recovery(rec) == f"{LISTED_ROLES + 1} roles, none with a success after the fault"
