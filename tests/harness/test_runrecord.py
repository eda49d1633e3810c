"""run.json's one owner (harness/contracts/runrecord.py): merge-writer, reader, typed model."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.contracts import manifest, runrecord


def test_update_merges_top_level_fields(tmp_path: Path) -> None:
    runrecord.update(tmp_path, run="r1", seed=3)
    runrecord.update(tmp_path, observations={"stalled": False, "agent_exit": {"a": 0}})
    runrecord.update(tmp_path, seed=4)
    data = json.loads((tmp_path / "run.json").read_text())
    assert data == {"run": "r1", "seed": 4, "observations": {"stalled": False, "agent_exit": {"a": 0}}}
    assert runrecord.read(tmp_path) == data
    assert not list(tmp_path.glob(".run.json.*"))  # the temporary file is gone


def test_the_format_is_the_one_the_environment_always_wrote(tmp_path: Path) -> None:
    fields = {"run": "r", "phases_s": {"traffic": 1.5}, "topology": {"path": Path("/x")}}
    runrecord.update(tmp_path, **fields)
    assert (tmp_path / "run.json").read_text() == json.dumps(fields, indent=2, default=str)


def test_unknown_keys_of_old_folders_are_kept(tmp_path: Path) -> None:
    old = {"run_id": "old-run", "legacy": {"x": [1, 2]}, "scenario": {"name": "s", "extra": 1}}
    (tmp_path / "run.json").write_text(json.dumps(old))
    runrecord.update(tmp_path, manifest="manifest.json")
    data = runrecord.read(tmp_path)
    assert data == {**old, "manifest": "manifest.json"}
    typed = runrecord.load(tmp_path)
    assert typed.scenario is not None and typed.scenario.name == "s"
    assert typed.model_extra == {"run_id": "old-run", "legacy": {"x": [1, 2]}}
    assert runrecord.run_id_of(data) == manifest.run_id_of(data) == "old-run"


def test_a_writer_cannot_write_a_field_of_the_wrong_type(tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        runrecord.update(tmp_path, scenario="not an object")
    with pytest.raises(ValidationError):
        runrecord.update(tmp_path, observations={"stalled": "maybe"})
    assert runrecord.read(tmp_path) is None  # nothing was written


def test_read_absent_and_broken_records(tmp_path: Path) -> None:
    assert runrecord.read(tmp_path) is None
    assert runrecord.load(tmp_path) == runrecord.RunRecord()
    (tmp_path / "run.json").write_text("[1]")
    with pytest.raises(runrecord.RunRecordError, match="not a JSON object"):
        runrecord.read(tmp_path)
    (tmp_path / "run.json").write_text("{")
    with pytest.raises(runrecord.RunRecordError, match="not JSON"):
        runrecord.read(tmp_path)
    assert runrecord.read_or_none(tmp_path) is None
    (tmp_path / "run.json").unlink()
    os.mkfifo(tmp_path / "run.json")  # never opened: reading a FIFO would block
    with pytest.raises(runrecord.RunRecordError, match="not a regular file"):
        runrecord.read(tmp_path)


def test_the_seal_marks_the_record_through_the_writer(tmp_path: Path) -> None:
    runrecord.update(tmp_path, run="sealed-run", agents=[])
    manifest.write(tmp_path)
    assert runrecord.read(tmp_path) == {"run": "sealed-run", "agents": [], "manifest": "manifest.json"}
    assert json.loads((tmp_path / "manifest.json").read_text())["run"] == "sealed-run"
