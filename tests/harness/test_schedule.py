"""Schedules as data: validation, files, the generated-chaos strategy, and the CLI's error path."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings

from harness.faults.schedule import Schedule, ScheduleError, Step, load_schedule
from scenarios.chaos import save_schedule, schedules


def test_schedule_file_round_trip(tmp_path):
    s = Schedule(seed=7, steps=[Step(at=3, fault="kill", target="master:pair", duration=4)], settle_s=5)
    path = tmp_path / "s.json"
    s.to_file(path)
    assert load_schedule(path) == s
    assert s.steps[0].ends_at == 7


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ('{"steps": [{"at": -1, "fault": "kill", "target": "x"}]}', "steps.0.at"),
        ('{"steps": [{"at": 1, "fault": "explode", "target": "x"}]}', "steps.0.fault"),
        ('{"steps": [{"at": 1, "fault": "kill"}]}', "steps.0.target"),
        ('{"steps": [], "bogus": 1}', "bogus"),
        ("steps: [", "not valid YAML"),
    ],
)
def test_bad_schedule_names_the_problem(tmp_path, body, words):
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    with pytest.raises(ScheduleError, match=words.replace(".", r"\.")):
        load_schedule(path)


def test_every_problem_carries_its_line_including_keys_pydantic_cannot_place(tmp_path) -> None:
    """A number as a key and a key written twice have no place in pydantic's error (the second is
    no error at all: YAML keeps the last): each is named at its own line, with the rest, in order."""
    path = tmp_path / "bad.yaml"
    path.write_text(
        "steps:\n"
        "  - at: 1\n"
        "    fault: kill\n"
        "    target: pair/master\n"
        "  - at: x\n"
        "    fault: pause\n"
        "    target: pair/master\n"
        "    1: 2\n"
        "settle_s: 5\n"
        "settle_s: 6\n"
    )
    with pytest.raises(ScheduleError) as e:
        load_schedule(path)
    text = str(e.value)
    assert (
        text.index(f"{path}:5: steps.1.at: Input should be a valid number")
        < text.index(f"{path}:8: steps.1.1: key 1 is a number, not a name")
        < text.index(f"{path}:10: settle_s: appears twice (first on line 9)")
    )
    assert "Keys should be strings" not in text  # the number key is named once, at its line


def test_a_key_written_twice_is_refused_even_when_the_rest_is_valid(tmp_path) -> None:
    path = tmp_path / "twice.yaml"
    path.write_text("steps: []\nseed: 1\nseed: 2\n")
    with pytest.raises(ScheduleError, match=r"twice\.yaml:3: seed: appears twice \(first on line 2\)"):
        load_schedule(path)


@settings(max_examples=50, deadline=None)
@given(schedules())
def test_generated_schedules_are_valid_and_replayable(tmp_path_factory, schedule):
    folder = tmp_path_factory.mktemp("sched")
    path = save_schedule(schedule, folder)
    again = load_schedule(path)
    assert again == schedule
    assert 1 <= len(again.steps) <= 3
    assert all(a.at <= b.at for a, b in zip(again.steps, again.steps[1:], strict=False))


def test_cli_rejects_a_bad_schedule_without_starting_anything(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"steps": [{"at": 1, "fault": "kill"}]}))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli.main",
            "run",
            "--schedule",
            str(bad),
            "--reports",
            str(tmp_path / "reports"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "steps.0.target" in out.stderr
    assert not (tmp_path / "reports").exists() or not any((tmp_path / "reports").iterdir())


# -- the validator reads the fault registry (harness.faults.kinds) --------------------------------
def test_every_schedulable_kind_is_a_step_and_nothing_else() -> None:
    from harness.faults.kinds import KINDS

    for name, k in KINDS.items():
        if k.schedulable:
            assert Step(at=0, fault=name, target="pair-1").fault == name
        else:
            with pytest.raises(ValueError, match="unknown fault"):
                Step(at=0, fault=name, target="pair-1")


@pytest.mark.parametrize(
    ("step", "words"),
    [
        (
            {"fault": "latency", "params": {"latency_ms": -5}},
            "steps.0.params: latency: latency_ms",
        ),
        ({"fault": "slicer", "params": {"avg": 5}}, "steps.0.params: slicer: avg: Extra inputs"),
        ({"fault": "kill", "params": {"timeout_s": 0}}, "steps.0.params: kill: timeout_s"),
    ],
)
def test_step_params_are_checked_against_their_kind(tmp_path, step, words) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"steps": [{"at": 1, "target": "pair-1", **step}]}))
    with pytest.raises(ScheduleError, match=words.replace(".", r"\.")):
        load_schedule(path)


def test_fault_params_fill_the_kinds_defaults() -> None:
    assert Step(at=0, fault="latency", target="x", params={"jitter_ms": 5}).fault_params().model_dump() == {
        "latency_ms": 500,
        "jitter_ms": 5,
    }
    kill = Step(at=0, fault="kill", target="x", wait_takeover=False).fault_params()
    assert kill.model_dump() == {"wait_takeover": False, "timeout_s": 60.0}
    assert Step(at=0, fault="pause", target="x").fault_params().model_dump() == {}
