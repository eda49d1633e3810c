"""How much worse a measure may get before it counts (docs/compare.md): a default per kind of
measure, overridden in the `[tool.bfh.compare.tolerance]` table of the pyproject.toml found from
the working folder upward.

A tolerance is `relative` (a share of OLD's median) and `absolute` (in the measure's unit); the
larger of the two is the allowance: recovery may grow by 25 % or by 0.5 s, whichever is more, so a
fast measure is not flagged for a few milliseconds and a slow one not for a few percent.
"""

from __future__ import annotations

import difflib
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.contracts.scorecard import MEASURES, base_name


class ToleranceError(ValueError):
    """A tolerance in pyproject.toml that cannot be used (one line: where and why)."""


@dataclass(frozen=True)
class Tolerance:
    relative: float = 0.0  # a share of OLD's median (0.25: +25 %)
    absolute: float = 0.0  # in the measure's unit (s, attempts per s, messages)

    def allowance(self, old_median: float) -> float:
        """The shift NEW may show over OLD before it is `worse` (and under, before `better`)."""
        return max(self.relative * abs(old_median), self.absolute)

    def text(self) -> str:
        parts = [f"+{self.relative * 100:g} %"] if self.relative else []
        return " or ".join([*parts, *([f"+{self.absolute:g}"] if self.absolute or not parts else [])])


UNITS = {"rate": "1/s", "duration": "s", "count": "count"}

#: by kind of measure, the first whose pattern matches the measure's base name (its name before a
#: `[role]`): latencies in seconds, rates, counts of messages
DEFAULTS: tuple[tuple[str, str, Tolerance], ...] = (
    # milliseconds on a serving broker: 25 % or 0.1 s (a loaded machine moves a p95 by tens of ms)
    ("publish latency", r"^publish_latency", Tolerance(0.25, 0.1)),
    # the agent's own retry pause (its backoff's sleep; the machine adds only its scheduling delay):
    # 25 % or 0.1 s. The reference's longest pause was 0.60-1.00 s a role in 20 rounds, load 2.5 to
    # 11.6 and beside stress-ng alike; recovery's 0.5 s would hide a backoff 50 % slower
    ("pause", r"pause", Tolerance(0.25, 0.1)),
    # attempts per second (the densest 5 s, a storm's peak): 25 % or half an attempt per second
    ("rate", r"(^|_)per_|_per_s$|_rate", Tolerance(0.25, 0.5)),
    # durations of a failover (recovery, takeover to delivery, a fleet's back-in): 25 % or 0.5 s
    ("duration", r"_s$", Tolerance(0.25, 0.5)),
    # counts of messages (duplicates, drops at the timeout): 25 % or one message
    ("count", r".", Tolerance(0.25, 1.0)),
)


def default(measure: str) -> tuple[str, Tolerance]:
    """The kind of a measure and its default tolerance: by its unit in the scorecard's MEASURES,
    else by its name."""
    base = base_name(measure)
    unit = MEASURES[base].unit if base in MEASURES else None
    for kind, pattern, tol in DEFAULTS:
        if unit and kind in UNITS and UNITS[kind] != unit:
            continue
        if re.search(pattern, base):
            return kind, tol
    return DEFAULTS[-1][0], DEFAULTS[-1][2]


class Tolerances:
    """The defaults, overridden by name: the full measure name first, then its base name."""

    def __init__(self, overrides: Mapping[str, Tolerance] | None = None, source: str | None = None):
        self.overrides = dict(overrides or {})
        self.source = source  # the pyproject.toml they came from, for the output

    def of(self, measure: str) -> Tolerance:
        for key in (measure, base_name(measure)):
            if key in self.overrides:
                return self.overrides[key]
        return default(measure)[1]

    @classmethod
    def from_table(cls, table: Mapping[str, Any], source: str = "pyproject.toml") -> Tolerances:
        """`{"recovery_s": {"relative": 0.5, "absolute": 1.0}, "duplicates": {"absolute": 0}}`;
        a key left out keeps its default."""
        out: dict[str, Tolerance] = {}
        for name, spec in table.items():
            where = f"{source}: [tool.bfh.compare.tolerance] {name}"
            if base_name(str(name)) not in MEASURES:  # a misspelt name would be ignored silently
                like = difflib.get_close_matches(base_name(str(name)), list(MEASURES), n=1)
                hint = f"did you mean {like[0]}?" if like else f"the measures: {', '.join(sorted(MEASURES))}"
                raise ToleranceError(f"{where}: no such measure; Fix: {hint}")
            if not isinstance(spec, Mapping):
                raise ToleranceError(f"{where}: want a table such as {{ relative = 0.25, absolute = 0.5 }}")
            unknown = set(spec) - {"relative", "absolute"}
            if unknown:
                raise ToleranceError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
            base = default(str(name))[1]
            values = {k: spec.get(k, getattr(base, k)) for k in ("relative", "absolute")}
            for k, v in values.items():
                if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
                    raise ToleranceError(f"{where}: {k} must be a number >= 0, not {v!r}")
            out[str(name)] = Tolerance(float(values["relative"]), float(values["absolute"]))
        return cls(out, source)


def find_pyproject(start: Path | None = None) -> Path | None:
    """The nearest pyproject.toml from `start` (the working folder) upward."""
    here = (start or Path.cwd()).absolute()
    for d in (here, *here.parents):
        if (d / "pyproject.toml").is_file():
            return d / "pyproject.toml"
    return None


def load(start: Path | None = None) -> Tolerances:
    """The tolerances of the project bfh runs in; the defaults where it sets none."""
    path = find_pyproject(start)
    if path is None:
        return Tolerances()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ToleranceError(f"{path}: cannot read it ({' '.join(str(e).split())})") from None
    table = data.get("tool", {}).get("bfh", {}).get("compare", {}).get("tolerance")
    if table is None:
        return Tolerances()
    if not isinstance(table, Mapping):
        raise ToleranceError(f"{path}: [tool.bfh.compare.tolerance] must be a table")
    return Tolerances.from_table(table, str(path))
