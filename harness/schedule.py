"""Fault schedules as data: timed steps with targets and durations, loadable from a file.

Targets name brokers, links, groups, `bridges`, or roles resolved when the step runs:
`master:<group>`, `slave:<group>`, `members:<group>` (every member).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from harness.faultkinds import FaultParamsError, Params, kind, schedulable


def _schedulable(name: str) -> str:
    if name not in schedulable():
        raise ValueError(f"unknown fault {name!r}; faults: {', '.join(schedulable())}")
    return name


FaultName = Annotated[str, AfterValidator(_schedulable)]  # a schedulable kind of harness.faultkinds


class ScheduleError(ValueError):
    pass


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    at: float = Field(ge=0, description="seconds after traffic starts")
    fault: FaultName
    target: str = Field(min_length=1)
    duration: float | None = Field(default=None, ge=0, description="heal after this many seconds")
    params: dict[str, Any] = Field(default_factory=dict)
    wait_takeover: bool = True  # kill/stop: the window ends when the group serves again

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

    seed: int = 0
    steps: list[Step] = Field(default_factory=list)
    settle_s: float = Field(default=10.0, ge=0, description="quiet time after healing, before accounting")

    def sorted_steps(self) -> list[Step]:
        return sorted(self.steps, key=lambda s: s.at)

    def to_file(self, path: Path) -> None:
        path.write_text(json.dumps(self.model_dump(mode="json"), indent=2), encoding="utf-8")


def load_schedule(path: str | Path) -> Schedule:
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))  # JSON is YAML too
    except OSError as e:
        raise ScheduleError(f"{p}: cannot read schedule ({e.strerror})") from None
    except yaml.YAMLError as e:
        raise ScheduleError(f"{p}: not valid YAML/JSON ({e})") from None
    try:
        return Schedule.model_validate(data)
    except ValidationError as e:
        details = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors())
        raise ScheduleError(f"{p}: invalid schedule: {details}") from None
