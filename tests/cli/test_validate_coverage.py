"""`bfh validate`'s coverage matrix against real brokers: topologies that cannot deliver what they
must fail the right cells with the path and its counts; the budget stops in time and names every
cell it left; the pytest plugin's --bfh-topology runs the same rows."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.cli.support import ROOT, bfh
from tests.cli.test_validate import running_under

pytestmark = [pytest.mark.broker, pytest.mark.spark]

# one family from every group's agents to every group's: spoke to spoke is a path (2 hops)
SPOKES_TTL1 = """name: spokes-ttl1
groups: [{name: hub}, {name: east}, {name: west}]
bridges:
  - {from: east, to: hub, duplex: true}
  - {from: west, to: hub, duplex: true}
traffic:
  families:
    - {name: status, topic: instance/status/#, from: agents, to: agents}
"""

ONE_WAY = """name: one-way
groups: [{name: a}, {name: b}]
bridges:
  - {from: a, to: b}
"""


def validate(tmp_path: Path, topology: str, *args: str, timeout: float = 600) -> tuple[Any, dict[str, Any]]:
    f = tmp_path / "topology.yaml"
    f.write_text(topology)
    p = bfh("validate", str(f), "--reports", str(tmp_path / "reports"), "--json", *args, timeout=timeout)
    assert p.stdout.strip(), p.stderr[-3000:]
    return p, json.loads(p.stdout)


def cell(m: dict[str, Any], row: str, path: str) -> dict[str, Any]:
    return next(r for r in m["rows"] if r["key"] == row)["cells"][path]


def test_network_ttl_too_low_fails_the_unreachable_baseline_cells(tmp_path: Path) -> None:
    p, m = validate(tmp_path, SPOKES_TTL1, "--faults", "baseline", "--junitxml", str(tmp_path / "v.xml"))
    assert p.returncode == 1, p.stderr[-3000:]
    assert "path east → west needs 2 hops, network_ttl is 1" in p.stderr
    for path in ("east->west", "west->east"):
        c = cell(m, "baseline", path)
        assert c["state"] == "lost" and c["lost"] == c["expected"] > 0, c
        assert "not routable, predicted" in c["text"]
    for path in ("hub->hub", "hub->east", "hub->west", "east->hub", "east->east", "west->hub", "west->west"):
        c = cell(m, "baseline", path)
        assert c["state"] == "ok" and c["expected"] > 0 and c["lost"] == 0, (path, c)
    assert sorted(m["failed_cells"]) == [
        "baseline / east->west",
        "baseline / promises",
        "baseline / west->east",
    ]
    assert cell(m, "baseline", "promises")["text"] == "broken: at_least_once", "the losses, as a promise"
    suite = ET.parse(tmp_path / "v.xml").getroot()
    failures = [tc.get("name") for tc in suite.iter("testcase") if tc.find("failure") is not None]
    assert "east → west [status]" in failures and "west → east [status]" in failures
    index = Path(m["index"]).read_text()
    assert 'id="matrix"' in index and "lost " in index
    assert not running_under(tmp_path)


@pytest.mark.extended  # about 70 s; the TTL test gates a bridge defect in the default run
def test_one_way_bridge_fails_the_way_back(tmp_path: Path) -> None:
    """The controllers on a: their families reach b; b's agents' status and initializer requests
    never reach the controllers."""
    p, m = validate(tmp_path, ONE_WAY, "--faults", "baseline")
    assert p.returncode == 1, p.stderr[-3000:]
    assert "no bridge forwards from b toward a" in p.stderr
    assert cell(m, "baseline", "a->b")["state"] == "ok"
    back = cell(m, "baseline", "b->a")
    assert back["state"] == "lost" and back["lost"] == back["expected"] > 0
    assert set(back["families"]) == {"instance-status", "initializer"}
    assert back["text"].startswith("lost: instance-status ") and ", initializer " in back["text"]
    reasons = next(r for r in m["rows"] if r["key"] == "baseline")["reasons"]
    assert any("path b → a [instance-status]: lost" in r for r in reasons), reasons


def test_budget_stops_in_time_and_names_what_it_left(tmp_path: Path) -> None:
    t0 = time.monotonic()
    p, m = validate(tmp_path, "name: solo\ngroups: [{name: solo}]\n", "--budget", "20s", "--parallel", "1")
    took = time.monotonic() - t0
    assert p.returncode == 2, p.stderr[-3000:]
    assert m["verdict"] == "incomplete"
    assert [r["verdict"] for r in m["rows"]][0] == "pass", "the baseline always runs"
    assert all(r["verdict"] == "not_run" for r in m["rows"][1:]) and len(m["rows"]) == 7
    assert (
        "kill:solo / solo->solo" in m["untested_cells"] and "both-down:solo / promises" in m["untested_cells"]
    )
    assert took < 240, f"{took:.0f}s: one run and one reconcile, no more"


@pytest.mark.extended  # about 75 s; the default run keeps validate's CLI path (the TTL test above)
def test_pytest_bfh_topology_runs_the_rows(tmp_path: Path) -> None:
    """From an agent team's folder: one test per row, a failure message per broken path."""
    f = tmp_path / "one-way.yaml"
    f.write_text(ONE_WAY)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "harness.pytest_plugin.plugin",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
            "--bfh-topology",
            str(f),
            "--bfh-faults",
            "baseline",
            "--bfh-reports",
            str(tmp_path / "reports"),
            "-q",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 1, out[-3000:]
    assert "test_topology_row[baseline]" in out
    assert "path b → a [instance-status] (deliver): lost, expected" in out, out[-3000:]
    assert "path b → a [initializer] (deliver): lost, expected" in out, out[-3000:]
    assert "1 failed" in out


def test_pytest_bfh_topology_bad_file_is_a_usage_error(tmp_path: Path) -> None:
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "harness.pytest_plugin.plugin",
            "--bfh-topology",
            "nosuch.yaml",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert p.returncode == 4, p.stdout + p.stderr
    assert "--bfh-topology" in p.stderr


SPLIT_STORE = """name: split
groups:
  - name: split
    kind: pair
    config: [m1.xml, m2.xml]
"""


@pytest.mark.extended  # three fault rows (about 2 min); the default run has the path cells above
def test_pair_whose_members_do_not_share_a_store_loses_at_failover(tmp_path: Path) -> None:
    """Each member's file names its own KahaDB (a deployment without shared storage): the harness
    runs them as deployed, every member a master, and a failover loses what the other held."""
    prod = (ROOT / "examples/ops/prod/broker-a1.xml").read_text()
    start, end = prod.index("        <!-- Bridge to pair B"), prod.index("</networkConnectors>") + 21
    solo = prod[:start] + prod[end:]
    for k in (1, 2):
        text = solo.replace("/mnt/mq-shared/pair-a/kahadb", f"/var/lib/activemq/kahadb-{k}")
        (tmp_path / f"m{k}.xml").write_text(text.replace('brokerName="mq-a1"', f'brokerName="mq-a{k}"'))
    (tmp_path / "credentials.properties").write_text(
        (ROOT / "examples/ops/prod/credentials.properties").read_text()
    )
    p, m = validate(tmp_path, SPLIT_STORE, "--faults", "kill,stop,rolling-restart")
    assert "name different stores" in p.stderr and "runs them so, as deployed" in p.stderr
    assert p.returncode == 1, p.stderr[-3000:]
    assert cell(m, "baseline", "split->split")["state"] == "ok"
    lost = {r["key"]: r["cells"]["split->split"]["lost"] for r in m["rows"][1:]}
    assert any(n > 0 for n in lost.values()), lost
    failed = next(r for r in m["rows"] if r["cells"]["split->split"]["lost"])
    assert any("path split → split [" in x and "lost" in x for x in failed["reasons"]), failed["reasons"]
    run = Path(failed["run_dir"])
    assert (run / "brokers/split-1-store").is_dir() and (run / "brokers/split-2-store").is_dir()


@pytest.mark.extended  # the catalog's seed002 test gates the same defect in the default run
def test_seed002_static_list_bridge_fails_the_bridge_health_cell(tmp_path: Path) -> None:
    topo = (ROOT / "harness/topologies/seed002-static-list.yaml").read_text()
    p, m = validate(tmp_path, topo, "--faults", "kill")
    assert p.returncode == 1, p.stderr[-3000:]
    cells = [r["cells"]["promises"] for r in m["rows"] if r["key"].startswith("kill:")]
    assert any("bridge_health" in c["text"] and c["ok"] is False for c in cells), cells
    row = next(r for r in m["rows"] if "bridge_health" in r["cells"]["promises"]["text"])
    assert any("bridges failed to connect" in x for x in row["reasons"]), row["reasons"]
