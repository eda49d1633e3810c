"""What `bfh compare` found: a row per entry and measure, a row per entry and promise, and the
comparison's exit code (0 no regression, 1 a regression, 2 could not compare)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

WORSE, BETTER, SAME, FEW = "worse", "better", "same", "not enough rounds"
VERDICTS = (WORSE, BETTER, SAME, FEW)


def _num(x: float | None) -> float | None:
    """JSON has no infinity: an open interval end is null."""
    return None if x is None or not math.isfinite(x) else round(x, 6)


@dataclass
class Side:
    """One side's numbers for one measure: each round's value (the median of its samples) and every
    sample of every round."""

    rounds: list[float] = field(default_factory=list)
    samples: list[float] = field(default_factory=list)
    median: float | None = None  # of the samples
    p95: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rounds": len(self.rounds),
            "round_values": [_num(x) for x in self.rounds],
            "samples": len(self.samples),
            "median": _num(self.median),
            "p95": _num(self.p95),
            "never_reached": sum(math.isinf(x) for x in self.rounds),  # rounds at +Infinity
        }


@dataclass
class MeasureRow:
    entry: str
    measure: str
    kind: str  # duration, rate, count, publish latency (harness/compare/tolerance.py)
    old: Side
    new: Side
    tolerance: float  # the allowance in the measure's unit, from OLD's median
    tolerance_text: str  # how it was set: "+25 % or +0.5"
    verdict: str = SAME
    shift: float | None = None  # Hodges-Lehmann: median of new - old round differences
    ci: tuple[float, float] | None = None
    confidence: float | None = None  # of the interval (two-sided; each side at the test's level)
    p_worse: float | None = None
    p_better: float | None = None
    rounds_needed: int | None = None  # per side, when `not enough rounds`
    why: str = ""
    names: list[str] = field(default_factory=list)  # the scorecard's names it gathers (one per role)

    @property
    def name(self) -> str:
        return f"{self.entry} :: {self.measure}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "measure": self.measure,
            "kind": self.kind,
            "verdict": self.verdict,
            "old": self.old.to_dict(),
            "new": self.new.to_dict(),
            "difference": _num(self.shift),
            "ci": [_num(self.ci[0]), _num(self.ci[1])] if self.ci else None,
            "confidence": self.confidence,
            "tolerance": _num(self.tolerance),
            "tolerance_rule": self.tolerance_text,
            "p_worse": self.p_worse,
            "p_better": self.p_better,
            "rounds_needed": self.rounds_needed,
            "why": self.why,
            "names": self.names,
        }


@dataclass
class PromiseRow:
    entry: str
    promise: str
    old_broken: int
    old_judged: int
    new_broken: int
    new_judged: int
    verdict: str = SAME
    p_worse: float | None = None
    p_better: float | None = None
    rounds_needed: int | None = None

    @property
    def newly_broken(self) -> bool:
        return self.old_broken == 0 and self.new_broken > 0

    @property
    def newly_kept(self) -> bool:
        return self.old_broken > 0 and self.new_broken == 0 and self.new_judged > 0

    def text(self) -> str:
        old, new = f"{self.old_broken}/{self.old_judged}", f"{self.new_broken}/{self.new_judged}"
        return f"{self.promise}: broken in {old} old, {new} new rounds"

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "promise": self.promise,
            "verdict": self.verdict,
            "old": {"broken": self.old_broken, "judged": self.old_judged},
            "new": {"broken": self.new_broken, "judged": self.new_judged},
            "newly_broken": self.newly_broken,
            "newly_kept": self.newly_kept,
            "p_worse": self.p_worse,
            "p_better": self.p_better,
            "rounds_needed": self.rounds_needed,
        }


@dataclass
class Comparison:
    """OLD against NEW. `problems`: why they could not be compared at all (exit 2)."""

    old: dict[str, Any]  # each side's identity: source, agent, harness version, rounds
    new: dict[str, Any]
    measures: list[MeasureRow] = field(default_factory=list)
    promises: list[PromiseRow] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    alpha: float = 0.05
    family: int = 0  # tests sharing alpha (Bonferroni over the reachable ones, Tarone)
    level: float = 0.05  # each test's one-sided level: alpha / family
    tolerance_source: str | None = None

    @property
    def regressions(self) -> list[MeasureRow | PromiseRow]:
        """Every measure or promise worse with confidence, beyond its tolerance."""
        return [
            *(m for m in self.measures if m.verdict == WORSE),
            *(p for p in self.promises if p.verdict == WORSE),
        ]

    @property
    def too_few(self) -> list[MeasureRow | PromiseRow]:
        return [
            *(m for m in self.measures if m.verdict == FEW),
            *(p for p in self.promises if p.verdict == FEW),
        ]

    @property
    def rounds_needed(self) -> int | None:
        """Rounds per side that every `not enough rounds` row needs."""
        return max((r.rounds_needed or 0 for r in self.too_few), default=None) or None

    @property
    def load_note(self) -> str | None:
        """When one side ran on a much busier machine (max load average over 1.5x the other's and
        above 2): its timings may be the machine's, not the agent's."""
        a, b = self.old.get("load_avg_max"), self.new.get("load_avg_max")
        if a is None or b is None:
            return None
        busy, calm, name = (b, a, "NEW") if b >= a else (a, b, "OLD")
        if busy > 2 and busy > 1.5 * max(calm, 0.1):
            return (
                f"{name} ran on a busier machine (load average up to {busy:.1f} against {calm:.1f}): "
                "a timing worse on that side may be the machine's"
            )
        return None

    @property
    def exit_code(self) -> int:
        """0 no regression, 1 a regression, 2 could not compare (a regression found among the rows
        that could be compared still exits 1: it is certain)."""
        if self.problems:
            return 2
        if self.regressions:
            return 1
        return 2 if self.too_few else 0

    def summary(self) -> str:
        """One line: the outcome."""
        if self.problems:
            return "cannot compare: " + "; ".join(self.problems)
        if self.regressions:
            names = ", ".join(
                f"{r.entry} {r.measure if isinstance(r, MeasureRow) else 'promise ' + r.promise}"
                for r in self.regressions
            )
            return f"regression: {names}"
        if self.too_few:
            return (
                f"not enough rounds for {len(self.too_few)} row(s): {self.rounds_needed} rounds per side "
                "are needed before a regression could be told from noise with 95 % confidence"
            )
        return "no regression"

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "bfh-compare/1",
            "outcome": self.summary(),
            "exit_code": self.exit_code,
            "old": self.old,
            "new": self.new,
            "alpha": self.alpha,
            "family": self.family,
            "level": self.level,
            "tolerance_source": self.tolerance_source,
            "load_note": self.load_note,
            "problems": self.problems,
            "rounds_needed": self.rounds_needed,
            "measures": [m.to_dict() for m in self.measures],
            "promises": [p.to_dict() for p in self.promises],
            "newly_broken": [p.to_dict() for p in self.promises if p.newly_broken],
            "newly_kept": [p.to_dict() for p in self.promises if p.newly_kept],
        }
