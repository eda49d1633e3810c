"""`bfh validate` names a prediction its run contradicts: tests/fixtures/prediction is a plain
bridge a -> b carrying two families whose filters both match one event (y/e is `y/#` and `+/e`);
ActiveMQ then forwards no `+/e` topic a -> b, while the prediction says it routes. Real brokers,
the baseline row."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.cli.support import ROOT, bfh
from tests.cli.test_validate import running_under

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.extended, pytest.mark.timeout(900)]


def test_a_contradicted_prediction_is_a_finding(tmp_path: Path) -> None:
    junit = tmp_path / "v.xml"
    p = bfh(
        "validate",
        str(ROOT / "tests/fixtures/prediction/topology.yaml"),
        "--faults",
        "baseline",
        "--junitxml",
        str(junit),
        "--json",
        "--reports",
        str(tmp_path / "reports"),
        timeout=600,
    )
    assert p.returncode == 1, p.stderr[-3000:]
    m = json.loads(p.stdout)
    assert any(
        x.startswith("baseline / a->b [w]: prediction wrong: predicted routable") for x in m["prediction"]
    ), m["prediction"]
    cell = m["rows"][0]["cells"]["a->b"]
    assert "prediction wrong: w" in cell["text"] and cell["ok"] is False, cell["text"]
    cases = [tc for tc in ET.parse(junit).getroot().iter("testcase") if tc.get("classname") == "prediction"]
    assert any(tc.get("name") == "baseline / a->b [w]" and tc.find("failure") is not None for tc in cases)
    assert not running_under(tmp_path)
