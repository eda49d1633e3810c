"""`bfh validate`'s coverage rows on the Docker backend: the same matrix, brokers as containers."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.coverage import RunOptions, validate_topology
from harness.topology import builtin_topology

pytestmark = [
    pytest.mark.docker,
    pytest.mark.broker,
    pytest.mark.spark,
    pytest.mark.extended,
    pytest.mark.timeout(1800),
]


def test_pair_rows_on_docker(tmp_path: Path, activemq_image: str) -> None:
    out = validate_topology(
        builtin_topology("pair"), RunOptions(reports=tmp_path, backend="docker"), faults=["kill"]
    )
    m = out.matrix
    assert [r["key"] for r in m["rows"]] == ["baseline", "kill:pair"]
    assert out.exit_code == 0, [r["reasons"] for r in m["rows"]]
    for r in m["rows"]:
        c = r["cells"]["pair->pair"]
        assert c["state"] in ("ok", "dup") and c["expected"] > 0 and c["lost"] == 0, (r["key"], c)
    assert out.index.exists() and 'id="matrix"' in out.index.read_text()
