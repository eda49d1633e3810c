"""The coverage plan and matrix as pure logic: which rows a topology gets, in which order, how a
budget is read, and how cells and exit codes follow from the runs (no broker started here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.coverage import CoverageError, parse_budget, plan_rows, workload
from harness.coverage.matrix import build, write_junit
from harness.coverage.validate import Coverage, RowResult
from harness.topology import load_topology, parse_topology
from harness.topology.paths import predict_traffic
from harness.verdict.checks.paths import path_cells
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


def _cells(entries: list[dict[str, Any]], lost: dict[tuple[str, str], int]) -> list[dict[str, Any]]:
    """The verdict's cells for the run.json path entries, `lost` per (path key, family)."""
    summary: dict[str, Any] = {"flows": []}
    for e in entries:
        n = lost.get((f"{e['from']}->{e['to']}", e["family"]), 0)
        flow = {k: e[k] for k in ("publisher", "subscriber", "subscription")}
        summary["flows"].append({**flow, "ok": 20 - n, "lost": n})
    return path_cells(summary, entries)


TWO = {"name": "two", "groups": [{"name": "a"}, {"name": "b"}], "bridges": [{"from": "a", "to": "b"}]}


def test_every_family_in_its_direction_gets_its_agents() -> None:
    """Controllers on the first group: its ctl-pub feeds every group's sub, every group's pub
    feeds its ctl-sub; each flow told apart by (publisher, subscriber, subscription)."""
    t = parse_topology(TWO, "t")
    entries = workload.measured(t, predict_traffic(t))
    keys = {(e["family"], e["from"], e["to"]) for e in entries}
    assert ("topology", "a", "b") in keys and ("instance-status", "b", "a") in keys
    assert ("instance-status", "a", "b") not in keys, "agents' status goes to the controllers only"
    flows = {(e["publisher"], e["subscriber"], e["subscription"]) for e in entries}
    assert len(flows) == len(entries)
    topo = next(e for e in entries if (e["family"], e["to"]) == ("topology", "b"))
    assert (topo["publisher"], topo["subscriber"], topo["subscription"]) == (
        "ctl-pub-a",
        "sub-b",
        "topology/#",
    )
    status = next(e for e in entries if (e["family"], e["from"]) == ("instance-status", "b"))
    assert (status["publisher"], status["subscriber"]) == ("pub-b", "ctl-sub-a")
    assert all(e["qos"] == 1 and e["durable"] for e in entries)


def test_a_forbidden_flow_is_watched_best_effort() -> None:
    """deliver: false for one family: the side whose every flow of it is forbidden goes QoS 0,
    so the run owes nothing there; the other families stay at least once."""
    t = parse_topology(
        {**TWO, "paths": [{"from": "a", "to": "b", "family": "tenant", "deliver": False}]}, "t"
    )
    entries = workload.measured(t, predict_traffic(t))
    tenant = next(e for e in entries if (e["family"], e["to"]) == ("tenant", "b"))
    assert tenant["must"] == "not" and (tenant["sub_qos"], tenant["durable"]) == (0, False)
    assert tenant["qos"] == 1, "a -> a still owes tenant at least once"
    topo = next(e for e in entries if (e["family"], e["to"]) == ("topology", "b"))
    assert topo["must"] == "report" and topo["durable"], "undeclared paths are measured at least once"
    assert not workload.caveats(entries)


def test_matrix_cells_and_exit_codes(tmp_path: Path) -> None:
    t = parse_topology(TWO, "t")
    preds = predict_traffic(t)
    entries = workload.measured(t, preds)
    rows = plan_rows(t, ["kill"], None)
    ok = [RowResult(r, tmp_path, "pass", cells=_cells(entries, {})) for r in rows]
    m = build(Coverage(t, preds, ok))
    # b -> a has no bridge, yet every flow delivered: the run contradicts the prediction
    assert m["exit_code"] == 1 and m["verdict"] == "fail"
    assert [p["key"] for p in m["paths"]] == ["a->a", "a->b", "b->a"]
    assert m["rows"][0]["cells"]["b->a"]["text"] == "ok; prediction wrong: instance-status, initializer"
    assert m["rows"][0]["cells"]["b->a"]["ok"] is False
    assert m["prediction"][0] == (
        "baseline / b->a [instance-status]: prediction wrong: predicted blocked (no bridge forwards "
        "from b toward a (a bridge carries its owner's messages; duplex: true adds the way back)), "
        "delivered 20"
    )
    assert {x.split(": ")[0].split(" / ")[1] for x in m["prediction"]} == {
        "b->a [instance-status]",
        "b->a [initializer]",
    }
    assert not m["failed_flows"]
    junit = write_junit(m, tmp_path / "p.xml").read_text()
    assert 'classname="prediction" name="baseline / b-&gt;a [instance-status]"' in junit
    duplex = parse_topology({**TWO, "bridges": [{"from": "a", "to": "b", "duplex": True}]}, "t")
    dpreds = predict_traffic(duplex)
    good = [RowResult(r, tmp_path, "pass", cells=_cells(workload.measured(duplex, dpreds), {})) for r in rows]
    m = build(Coverage(duplex, dpreds, good))
    assert m["exit_code"] == 0 and m["verdict"] == "pass" and m["prediction"] == []
    assert m["rows"][0]["cells"]["b->a"]["text"] == "ok"
    assert set(m["rows"][0]["cells"]["a->b"]["families"]) == {
        "topology",
        "instance-notifier",
        "tenant",
        "application-signup",
    }

    lost = {("b->a", "instance-status"): 20, ("b->a", "initializer"): 5}
    bad = [RowResult(rows[0], tmp_path, "fail", ["paths", "at_least_once"], cells=_cells(entries, lost))]
    bad += ok[1:]
    m = build(Coverage(t, preds, bad))
    assert m["exit_code"] == 1
    cell = m["rows"][0]["cells"]["b->a"]
    assert cell["ok"] is False and cell["lost"] == 25
    assert cell["text"] == (
        "lost: instance-status 20 of 20 (not routable, predicted), "
        "initializer 5 of 20 (not routable, predicted); prediction wrong: initializer"
    ), "15 of initializer's 20 crossed where no bridge goes"
    assert cell["families"]["instance-status"]["state"] == "lost"
    assert m["failed_flows"] == ["baseline / b->a [instance-status]", "baseline / b->a [initializer]"]
    assert m["rows"][0]["cells"]["promises"]["text"] == "broken: at_least_once"
    junit = write_junit(m, tmp_path / "v.xml").read_text()
    assert 'classname="baseline" name="b → a [instance-status]"' in junit and "<failure" in junit
    assert 'name="a → b [topology]"' in junit
    assert "no bridge forwards from b toward a" in junit, "the failure says why, as predicted"

    left = good[:1] + [RowResult(r) for r in rows[1:]]  # the budget left the rest
    m = build(Coverage(duplex, dpreds, left))
    assert m["exit_code"] == 2 and m["verdict"] == "incomplete"
    assert "kill:a / a->b" in m["untested_cells"]
    assert m["rows"][1]["cells"]["a->b"]["text"] == "not exercised"
    assert "<skipped" in write_junit(m, tmp_path / "v2.xml").read_text()


def test_a_run_without_traffic_on_a_family_fails_the_cell(tmp_path: Path) -> None:
    t = load_topology("pair")
    preds = predict_traffic(t)
    entries = workload.measured(t, preds)
    [row] = plan_rows(t, ["baseline"], None)
    cells = _cells(entries, {})
    quiet = next(c for c in cells if c["family"] == "tenant")
    quiet.update(expected=0, delivered=0, state="not_exercised", ok=False)
    m = build(Coverage(t, preds, [RowResult(row, tmp_path, "fail", ["paths"], cells=cells)]))
    assert m["exit_code"] == 1, "a flow the run never measured is no pass"
    assert m["rows"][0]["cells"]["pair->pair"]["text"] == "no traffic: tenant"
    assert m["rows"][0]["cells"]["pair->pair"]["families"]["topology"]["text"] == "ok"


class _Addresses:
    """The one thing an agent factory asks of a running environment: a group's broker URLs."""

    def mb_urls(self, proto: str, group: str | None) -> list[str]:
        return [f"tcp://{group}-1:1883", f"tcp://{group}-2:1883"]


def test_agents_publish_every_event_topic_and_the_fleet_copies_the_agents_subscriber() -> None:
    t = load_topology(ROOT / "examples/ops/hub-spoke.yaml")
    entries = workload.measured(t, predict_traffic(t))
    specs = {s.name: s for s in workload.agents(t, entries, 20, 5.0, 40, None, fleet=2)(_Addresses())}
    assert set(specs) == {
        *(f"{k}-{g}" for k in ("pub", "sub") for g in ("hub", "east", "west")),
        *(f"fleet-{g}-002" for g in ("hub", "east", "west")),
        "ctl-pub-hub",
        "ctl-sub-hub",
    }
    ctl = specs["ctl-pub-hub"].workload
    assert ctl["subscriptions"] == [] and len(ctl["publications"]) == 5, "every controller event topic"
    assert {(p["count"], p["rate_per_s"], p["qos"]) for p in ctl["publications"]} == {(20, 5.0, 1)}
    assert [s["topic"] for s in specs["ctl-sub-hub"].workload["subscriptions"]] == [
        "instance/status/#",
        "initializer/#",
    ]
    east = specs["sub-east"].workload["subscriptions"]
    assert east == specs["fleet-east-002"].workload["subscriptions"]
    assert {s["topic"] for s in east} == {
        "topology/#",
        "instance/notifier/#",
        "tenant/#",
        "application/signup/#",
    }
    assert all(s["qos"] == 1 and s["durable"] for s in east)
    assert specs["pub-west"].conf["mb.urls"] == "tcp://west-1:1883,tcp://west-2:1883"


def test_a_forbidden_flow_where_nothing_crossed_is_ok(tmp_path: Path) -> None:
    t = parse_topology({**TWO, "paths": [{"from": "b", "to": "a", "deliver": False}]}, "t")
    preds = predict_traffic(t)
    entries = workload.measured(t, preds)
    assert {e["family"] for e in entries if e["must"] == "not"} == {"instance-status", "initializer"}
    assert all(e["qos"] == 0 for e in entries if e["must"] == "not"), "b's publisher owes nothing to a"
    cells = path_cells({"flows": []}, entries)
    for c in cells:
        if c["must"] == "not":
            c.update(expected=20, state="quiet", ok=True)
    [row] = plan_rows(t, ["baseline"], None)
    m = build(Coverage(t, preds, [RowResult(row, tmp_path, "pass", cells=cells)]))
    back = m["rows"][0]["cells"]["b->a"]
    assert back["ok"] is True and back["text"] == "ok"
    assert back["families"]["instance-status"]["text"] == "ok (nothing crossed)"
