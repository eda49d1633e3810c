"""Fault schedules as data: timed steps with targets and durations, loadable from a file.

Targets name brokers, links, groups, `bridges`, `bridge:<from>-><to>` (one bridge's links), or roles
resolved when the step runs:
`master:<group>`, `slave:<group>`, `members:<group>` (every member).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from harness.faults.kinds import FaultParamsError, Params, kind, schedulable
from harness.topology.files import InputFileError, read_text
from harness.topology.parts import key_text
from harness.topology.yamlsafe import LineIndex, compose, problem

MAX_SECONDS = 7 * 86400.0  # a week: any step time or duration beyond it is a typo


def _seconds(v: Any) -> Any:
    # finite, and not a boolean (YAML `at: yes` would be 1.0)
    if isinstance(v, bool) or (isinstance(v, float) and not math.isfinite(v)):
        raise ValueError("must be a finite number of seconds")
    return v


Seconds = Annotated[float, BeforeValidator(_seconds), Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False)]


def _schedulable(name: str) -> str:
    if name not in schedulable():
        raise ValueError(f"unknown fault {name!r}; faults: {', '.join(schedulable())}")
    return name


FaultName = Annotated[str, AfterValidator(_schedulable)]  # a schedulable kind of harness.faults.kinds


class ScheduleError(ValueError):
    pass


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    at: Seconds = Field(description="seconds after traffic starts")
    fault: FaultName
    target: str = Field(min_length=1)
    duration: Seconds | None = Field(default=None, description="heal after this many seconds")
    params: dict[str, Any] = Field(default_factory=dict)
    wait_takeover: StrictBool = True  # kill/stop: the window ends when the group serves again

    @field_validator("params")
    @classmethod
    def _params_fit_the_fault(cls, params: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        fault = info.data.get("fault")
        if fault is not None:  # an unknown fault is reported on its own
            try:
                kind(fault).parse(params)
            except FaultParamsError as e:
                raise ValueError(str(e)) from None
        return params

    @property
    def ends_at(self) -> float:
        return self.at + (self.duration or 0.0)

    def fault_params(self) -> Params:
        """The step's params validated by its kind, defaults filled (kill/stop: `wait_takeover`)."""
        k = kind(self.fault)
        takeover = (
            {"wait_takeover": self.wait_takeover} if "wait_takeover" in k.params_model.model_fields else {}
        )
        return k.parse({**self.params, **takeover})


class Schedule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: StrictInt = Field(default=0, ge=-(2**63), lt=2**63)
    steps: list[Step] = Field(default_factory=list, max_length=10_000)
    settle_s: Seconds = Field(default=10.0, description="quiet time after healing, before accounting")

    def sorted_steps(self) -> list[Step]:
        return sorted(self.steps, key=lambda s: s.at)

    def to_file(self, path: Path) -> None:
        path.write_text(json.dumps(self.model_dump(mode="json"), indent=2), encoding="utf-8")


def load_schedule(path: str | Path) -> Schedule:
    """A schedule file (YAML or JSON); ScheduleError names every problem (the first five) with its
    line: `file:line: key.path: what`."""
    p = Path(path)
    try:
        node, data = compose(read_text(p))  # JSON is YAML too
    except InputFileError as e:
        raise ScheduleError(f"cannot read schedule {e}") from None
    except yaml.YAMLError as e:
        msg, line = problem(e)
        raise ScheduleError(f"{p}{f':{line}' if line else ''}: not valid YAML/JSON ({msg})") from None
    index = LineIndex.of(node)
    # keys pydantic would report without a line, or not at all (a key written twice)
    found: list[tuple[int | None, str, str]] = [
        (k.line, _dotted((*k.loc, k.key)), k.what) for k in index.odd_keys
    ]
    try:
        schedule = Schedule.model_validate(data)
    except ValidationError as e:
        non_text = {k.key for k in index.odd_keys if k.kind}
        for x in e.errors():
            loc = tuple(part for part in x["loc"] if part != "[key]")
            if x["type"] == "invalid_key" and str(x.get("input")) in non_text:
                continue  # already named, at its line
            msg = str(x["msg"]).removeprefix("Value error, ").replace("\n", " ")
            found.append((index.line_of(loc), _dotted(loc), msg))
    else:
        if not found:
            return schedule
    found.sort(key=lambda f: f[0] or 0)
    shown = "; ".join(f"{p}{f':{line}' if line else ''}: {where}: {what}" for line, where, what in found[:5])
    more = f" (and {len(found) - 5} more)" if len(found) > 5 else ""
    raise ScheduleError(f"invalid schedule: {shown}{more}")


def _dotted(loc: tuple[Any, ...]) -> str:
    return ".".join(map(key_text, loc)) or "(document)"
