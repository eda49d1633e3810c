"""Fault schedules as data: timed steps with targets and durations, loadable from a file.

Targets name brokers, links, groups, `bridges`, or roles resolved when the step runs:
`master:<group>`, `slave:<group>`, `members:<group>` (every member).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

BROKER_FAULTS = ("kill", "stop", "pause", "restart", "isolate")
LINK_FAULTS = ("down", "partition", "latency", "bandwidth", "reset_peer", "slicer", "limit_data", "sever")
FaultName = Literal[
    "kill",
    "stop",
    "pause",
    "restart",
    "isolate",
    "down",
    "partition",
    "latency",
    "bandwidth",
    "reset_peer",
    "slicer",
    "limit_data",
    "sever",
]


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

    @property
    def ends_at(self) -> float:
        return self.at + (self.duration or 0.0)


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
