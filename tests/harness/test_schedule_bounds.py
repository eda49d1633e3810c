"""Issue 34, schedule files: times finite and range-checked, no aliases, regular files only;
each a one-line ScheduleError."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.faults.schedule import ScheduleError, load_schedule

STEP = '{"fault": "kill", "target": "a-1"'


@pytest.mark.parametrize(
    "text,match",
    [
        ('{"steps": [' + STEP + ', "at": NaN}]}', "finite"),
        ('{"steps": [' + STEP + ', "at": Infinity}]}', "finite"),
        ('{"steps": [' + STEP + ', "at": 1e400}]}', "finite"),
        ('{"steps": [' + STEP + ', "at": 1, "duration": -Infinity}]}', "finite|greater"),
        ('{"steps": [' + STEP + ', "at": true}]}', "finite number"),
        ('{"steps": [' + STEP + ', "at": 1e9}]}', "less than or equal"),
        ('{"settle_s": .nan}', "finite"),
        ('{"seed": 1.5}', "seed"),
        ('{"seed": true}', "seed"),
        ("a: &a [1]\nb: *a\n", "aliases"),
        ("steps: " + "[" * 1000 + "]" * 1000, "nested deeper"),
        ("seed: " + "9" * 5000, "4300 digits"),
        ("seed: 1\x00", "unacceptable character"),
    ],
)
def test_bad_schedule_text(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ScheduleError, match=match) as info:
        load_schedule(path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("kind", ["fifo", "zero", "dir", "missing"])
def test_schedule_must_be_a_regular_file(tmp_path: Path, kind: str) -> None:
    path = {"zero": Path("/dev/zero"), "dir": tmp_path}.get(kind, tmp_path / "s.json")
    if kind == "fifo":
        os.mkfifo(path)
    with pytest.raises(ScheduleError, match="cannot read schedule") as info:
        load_schedule(path)
    assert "\n" not in str(info.value)


def test_a_good_schedule_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"seed": 3, "steps": [' + STEP + ', "at": 2.5, "duration": 4}]}')
    s = load_schedule(path)
    assert s.seed == 3 and s.steps[0].at == 2.5 and s.steps[0].ends_at == 6.5
