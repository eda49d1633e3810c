"""Fuzz: schedule files (JSON or YAML): steps with hostile times, faults, targets and params,
sometimes damaged as text. Every case is a Schedule with finite, in-range times or a one-line
ScheduleError: never a traceback."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from harness.faults.kinds import schedulable
from harness.faults.schedule import MAX_SECONDS, ScheduleError, load_schedule

from .common import FUZZ, SCALARS, VALUES, Tally

TIMES = st.one_of(
    st.floats(min_value=0, max_value=1000), st.integers(0, 1000), SCALARS, st.sampled_from([1e9, -0.0])
)
PARAMS = st.dictionaries(
    st.sampled_from(["ms", "jitter_ms", "rate_kbps", "bytes", "links", "stream", "toxicity", "x"])
    | st.text(max_size=6),
    VALUES,
    max_size=3,
)
STEP = st.fixed_dictionaries(
    {
        "at": TIMES,
        "fault": st.sampled_from(schedulable()) | st.text(max_size=6),
        "target": SCALARS | st.just("a-1"),
    },
    optional={"duration": TIMES, "params": PARAMS, "wait_takeover": SCALARS, "extra": VALUES},
)
DOC = st.fixed_dictionaries(
    {}, optional={"seed": SCALARS, "steps": st.lists(STEP, max_size=4), "settle_s": TIMES}
)


@st.composite
def schedule_texts(draw: st.DrawFn) -> str:
    doc = draw(DOC | VALUES)
    text = json.dumps(doc) if draw(st.booleans()) else yaml.safe_dump(doc)  # json: NaN, Infinity
    if draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(text)))
        text = (
            text[:at] + draw(st.sampled_from(["&a ", "*a", "\x00", "[" * 100, "9" * 5000, "{"])) + text[at:]
        )
    return text


def test_schedule_fuzz(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "schedule.json"
    tally = Tally()

    @FUZZ
    @given(text=schedule_texts())
    @example(text="? '\n\n  '\n: null\n")  # a key of line breaks: it was shown unquoted, on 2 lines
    def case(text: str) -> None:
        tally["cases"] += 1
        path.write_text(text)
        try:
            s = load_schedule(path)
        except ScheduleError as e:
            assert str(e).strip() and "\n" not in str(e)
            tally["refused"] += 1
            return
        times = [s.settle_s] + [t for st_ in s.steps for t in (st_.at, st_.duration or 0.0)]
        assert all(math.isfinite(t) and 0 <= t <= MAX_SECONDS for t in times)
        for step in s.steps:
            step.fault_params()  # the params a valid step carries parse
        tally["valid"] += 1

    case()
    with capsys.disabled():
        print("\n" + tally.report("schedule fuzz"))
    assert tally["refused"] and tally["valid"]
