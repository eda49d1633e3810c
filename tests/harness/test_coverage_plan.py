"""The coverage plan and matrix as pure logic: which rows a topology gets, in which order, how a
budget is read, and how cells and exit codes follow from the runs (no broker started here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.coverage import CoverageError, parse_budget, plan_rows
from harness.coverage.matrix import build, write_junit
from harness.coverage.validate import Coverage, RowResult
from harness.topology import load_topology, parse_topology
from harness.topology.paths import predict
from tests.cli.support import ROOT


def hub_spoke() -> Any:
    return load_topology(ROOT / "examples/ops/hub-spoke.yaml")


def test_hub_spoke_rows_baseline_first_then_kills_then_bridges() -> None:
    rows = plan_rows(hub_spoke(), None, None)
    assert len(rows) == 1 + 3 * 6 + 2 * 3
    assert rows[0].key == "baseline"
    assert [r.key for r in rows[1:4]] == ["kill:hub", "kill:east", "kill:west"]
    assert {r.fault for r in rows[4:8]} == {"bridge-blackhole", "bridge-cut"}
    assert {r.fault for r in rows[8:11]} == {"stop", "pause"}
    assert {r.key for r in rows} >= {
        "rolling-restart:east",
        "slave-loss:hub",
        "both-down:west",
        "bridge-handshake:east->hub",
    }
    assert len({r.key for r in rows}) == len(rows)


def test_one_group_gets_its_group_rows() -> None:
    rows = plan_rows(load_topology("pair"), None, None)
    assert [r.fault for r in rows][:2] == ["baseline", "kill"]
    assert {r.fault for r in rows} == {
        "baseline",
        "kill",
        "stop",
        "pause",
        "slave-loss",
        "rolling-restart",
        "both-down",
    }


def test_faults_and_groups_narrow_the_rows() -> None:
    rows = plan_rows(hub_spoke(), ["kill", "pause"], ["east"])
    assert [r.key for r in rows] == ["baseline", "kill:east", "pause:east"]
    rows = plan_rows(hub_spoke(), ["bridge-cut"], ["hub"])
    assert [r.key for r in rows] == ["baseline", "bridge-cut:east->hub", "bridge-cut:west->hub"]


def test_bad_names_are_refused_before_anything_starts() -> None:
    with pytest.raises(CoverageError, match="unknown fault"):
        plan_rows(hub_spoke(), ["kil"], None)
    with pytest.raises(CoverageError, match="unknown group"):
        plan_rows(hub_spoke(), None, ["north"])


@pytest.mark.parametrize(
    ("text", "want"), [("600", 600.0), ("90s", 90.0), ("10m", 600.0), ("1h", 3600.0), (None, None)]
)
def test_budget(text: str | None, want: float | None) -> None:
    assert parse_budget(text) == want


@pytest.mark.parametrize("text", ["ten", "-5m", "0", "5d", "m"])
def test_bad_budget(text: str) -> None:
    with pytest.raises(CoverageError):
        parse_budget(text)


def _cells(paths: list[str], lost: dict[str, int]) -> list[dict[str, Any]]:
    out = []
    for key in paths:
        src, dst = key.split("->")
        n = lost.get(key, 0)
        out.append(
            {
                "from": src,
                "to": dst,
                "must": "deliver",
                "expected": 100,
                "delivered": 100 - n,
                "lost": n,
                "duplicated": 0,
                "dropped": 0,
                "ok": n == 0,
                "state": "lost" if n else "ok",
            }
        )
    return out


def test_matrix_cells_and_exit_codes(tmp_path: Path) -> None:
    t = parse_topology(
        {
            "name": "two",
            "groups": [{"name": "a"}, {"name": "b"}],
            "bridges": [{"from": "a", "to": "b"}],
        },
        "t",
    )
    preds = predict(t)
    rows = plan_rows(t, ["kill"], None)
    keys = [p.key for p in preds]
    ok = [RowResult(r, tmp_path, "pass", cells=_cells(keys, {})) for r in rows]
    m = build(Coverage(t, preds, ok))
    assert m["exit_code"] == 0 and m["verdict"] == "pass"
    assert m["rows"][0]["cells"]["b->a"]["text"] == "ok"

    bad = [
        RowResult(rows[0], tmp_path, "fail", ["paths", "at_least_once"], cells=_cells(keys, {"b->a": 120}))
    ]
    bad += ok[1:]
    m = build(Coverage(t, preds, bad))
    assert m["exit_code"] == 1
    cell = m["rows"][0]["cells"]["b->a"]
    assert cell["text"] == "lost 120 of 100 (not routable, predicted)" and cell["ok"] is False
    assert m["rows"][0]["cells"]["promises"]["text"] == "broken: at_least_once"
    junit = write_junit(m, tmp_path / "v.xml").read_text()
    assert 'classname="baseline" name="b → a"' in junit and "<failure" in junit

    left = ok[:1] + [RowResult(r) for r in rows[1:]]  # the budget left the rest
    m = build(Coverage(t, preds, left))
    assert m["exit_code"] == 2 and m["verdict"] == "incomplete"
    assert "kill:a / a->b" in m["untested_cells"]
    assert m["rows"][1]["cells"]["a->b"]["text"] == "not exercised"
    assert "<skipped" in write_junit(m, tmp_path / "v2.xml").read_text()


def test_a_run_without_traffic_on_a_path_fails_the_cell(tmp_path: Path) -> None:
    t = load_topology("pair")
    preds = predict(t)
    [row] = plan_rows(t, ["baseline"], None)
    cell = {
        **_cells(["pair->pair"], {})[0],
        "expected": 0,
        "delivered": 0,
        "state": "not_exercised",
        "ok": False,
    }
    m = build(Coverage(t, preds, [RowResult(row, tmp_path, "fail", ["paths"], cells=[cell])]))
    assert m["exit_code"] == 1, "a path the run never measured is no pass"
    assert m["rows"][0]["cells"]["pair->pair"]["text"] == "no traffic (not exercised)"
