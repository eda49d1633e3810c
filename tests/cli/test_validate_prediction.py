"""`bfh validate` names a prediction its run contradicts: tests/fixtures/prediction is a bridge
a -> b whose destinationFilter admits only `*.e` consumers' advisories; the prediction blocks
family x (`x/#`) there, and ActiveMQ delivers x/e all the same: family w's `*.e` demand carries
it. Real brokers, the baseline row."""

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
        x.startswith("baseline / a->b [x]: prediction wrong: predicted blocked") for x in m["prediction"]
    ), m["prediction"]
    cell = m["rows"][0]["cells"]["a->b"]
    assert "prediction wrong: x" in cell["text"] and cell["ok"] is False, cell["text"]
    cases = [tc for tc in ET.parse(junit).getroot().iter("testcase") if tc.get("classname") == "prediction"]
    assert any(tc.get("name") == "baseline / a->b [x]" and tc.find("failure") is not None for tc in cases)
    assert not running_under(tmp_path)
