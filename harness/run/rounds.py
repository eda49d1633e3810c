"""Rounds: one scenario run N times, and how sure its record makes us (issue 35).

A race fails some rounds and passes others, so one green round proves little. For k failures in N
rounds the 95 % upper bound on the failure probability is the Clopper-Pearson bound: the p at which
seeing k or fewer failures has probability 5 % (0 of N: 1 - 0.05^(1/N), about 3/N). Computed by
bisection on the binomial CDF (no scipy).

Inconclusive (an `unknown` verdict: a checker crashed, or overload explains a timing breach) is its
own outcome, never a pass: the round is run again up to `rerun_unknown` times (`settle`), and still
unknown it fails as "inconclusive: <why>", unless the policy is `skip` (an explicit opt-in, counted).
One rule for a single run, rounds, the pytest plugin and `bfh run`.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONFIDENCE = 0.95
#: what an inconclusive round is: `fail` (the default) or `skip` (counted, never silent)
UNKNOWN_POLICIES = ("fail", "skip")
#: how many times an unknown round runs again before it is inconclusive
RERUN_UNKNOWN = 1


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 1.0 if k >= n else 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    return min(
        1.0,
        sum(
            math.exp(
                math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
            )
            for i in range(k + 1)
        ),
    )


def upper_bound(failures: int, rounds: int, confidence: float = CONFIDENCE) -> float:
    """The one-sided Clopper-Pearson upper bound on the failure probability."""
    if rounds < 1 or not 0 <= failures <= rounds:
        raise ValueError(f"{failures} failures of {rounds} rounds")
    if failures == rounds:
        return 1.0
    alpha = 1.0 - confidence
    lo, hi = failures / rounds, 1.0
    for _ in range(100):  # the CDF falls as p grows: find where it crosses alpha
        mid = (lo + hi) / 2
        if binom_cdf(failures, rounds, mid) > alpha:
            lo = mid
        else:
            hi = mid
    return hi


@dataclass
class Round:
    index: int
    verdict: str  # pass | fail | n/a | unknown | error
    run_dir: Path | None
    replay: str = ""
    message: str = ""  # the failure message of a failing round
    reruns: int = 0  # how many times it ran again because its verdict was unknown
    why: str = ""  # an unknown verdict's reason (the unknown gated promises)

    @property
    def failed(self) -> bool:
        return self.verdict not in ("pass", "n/a")

    @property
    def inconclusive(self) -> bool:
        return self.verdict == "unknown"


def inconclusive_line(why: str, reruns: int) -> str:
    """The one line an inconclusive round fails (or is skipped) with."""
    again = f" (after {reruns} re-run(s))" if reruns else ""
    return f"inconclusive{again}: {why or 'the run could not be judged'}"


def settle(one: Callable[[int], Round], rerun_unknown: int = RERUN_UNKNOWN) -> Round:
    """`one(0)`, run again (`one(1)`, ...) while its verdict is unknown, at most `rerun_unknown`
    more times: the last attempt's Round, with how many re-runs it took."""
    if rerun_unknown < 0:
        raise ValueError(f"re-runs of an unknown verdict must be at least 0, not {rerun_unknown}")
    r, n = one(0), 0
    while r.inconclusive and n < rerun_unknown:
        n += 1
        r = one(n)
    r.reruns = n
    return r


@dataclass
class Tally:
    """The rounds of one scenario."""

    scenario: str
    rounds: list[Round] = field(default_factory=list)
    unknown: str = "fail"  # UNKNOWN_POLICIES: whether an inconclusive round fails or is skipped

    def _fails(self, r: Round) -> bool:
        return r.failed and not (r.inconclusive and self.unknown == "skip")

    @property
    def failures(self) -> int:
        return sum(self._fails(r) for r in self.rounds)

    @property
    def inconclusive(self) -> int:
        return sum(r.inconclusive for r in self.rounds)

    @property
    def skipped(self) -> int:
        """Inconclusive rounds the `skip` policy left out of the failures."""
        return self.inconclusive if self.unknown == "skip" else 0

    @property
    def reruns(self) -> int:
        return sum(r.reruns for r in self.rounds)

    @property
    def upper(self) -> float:
        return upper_bound(self.failures, len(self.rounds))

    @property
    def first_failure(self) -> Round | None:
        return next((r for r in self.rounds if self._fails(r)), None)

    def line(self) -> str:
        """e.g. "masterslave: 0 of 5 rounds failed; failure probability < 45.1 % (95 %)"."""
        extra = []
        if self.inconclusive:
            verb = "skipped (--unknown=skip)" if self.unknown == "skip" else "failed as such"
            extra.append(f"{self.inconclusive} inconclusive, {verb}")
        if self.reruns:
            extra.append(f"{self.reruns} re-run(s) of an unknown verdict")
        return (
            f"{self.scenario}: {self.failures} of {len(self.rounds)} rounds failed; "
            f"failure probability < {100 * self.upper:.1f} % (95 % upper bound)"
            + "".join(f"; {e}" for e in extra)
        )

    def message(self) -> str:
        """The failure message: the first failing round's run folder and replay command first."""
        first = self.first_failure
        if first is None:
            return self.line()
        head = [f"first failing round {first.index + 1}: run folder {first.run_dir}"]
        if first.replay:
            head.append(f"  replay: {first.replay}")
        if first.inconclusive:
            head.append("  " + inconclusive_line(first.why, first.reruns))
        return "\n".join([*head, "  " + self.line(), first.message])

    def to_dict(self) -> dict[str, Any]:
        first = self.first_failure
        return {
            "scenario": self.scenario,
            "rounds": len(self.rounds),
            "failures": self.failures,
            "failure_p_upper95": round(self.upper, 4),
            "first_failing_run": str(first.run_dir) if first else None,
            "replay": first.replay if first else None,
            "verdicts": [r.verdict for r in self.rounds],
            "inconclusive": self.inconclusive,
            "skipped": self.skipped,
            "reruns": self.reruns,
            "run_dirs": [str(r.run_dir) if r.run_dir else None for r in self.rounds],
        }

    def properties(self) -> list[tuple[str, Any]]:
        """JUnit properties."""
        d = self.to_dict()
        keys = ("rounds", "failures", "failure_p_upper95", "first_failing_run", "replay")
        return [(k, d[k]) for k in keys if d[k] is not None]


def repeat(scenario: str, n: int, one: Callable[[int], Round], unknown: str = "fail") -> Tally:
    """Run `one(i)` for i in 0..n-1 (each round its own run folder) and tally the verdicts."""
    if n < 1:
        raise ValueError(f"--rounds must be at least 1, not {n}")
    if unknown not in UNKNOWN_POLICIES:
        raise ValueError(f"unknown-verdict policy {unknown!r}; choose from {', '.join(UNKNOWN_POLICIES)}")
    tally = Tally(scenario, unknown=unknown)
    for i in range(n):
        tally.rounds.append(one(i))
    return tally


def replay_command(scenario: str, seed: int | None, agent_cmd: str | None, topology: str = "pair") -> str:
    """The command that runs a catalog round again: the entry with the round's seed (and agent)."""
    parts = ["bfh run", scenario]
    if topology != "pair":
        parts += ["--topology", topology]
    if seed is not None:
        parts += ["--seed", str(seed)]
    if agent_cmd:
        parts += ["--agent-cmd", shlex.quote(agent_cmd)]
    return " ".join(parts)


def write_json(tallies: list[Tally], root: Path) -> Path:
    """reports/rounds-<time>.json: every tally of a `--rounds` command."""
    import json
    import time

    root.mkdir(parents=True, exist_ok=True)
    path = root / f"rounds-{time.strftime('%Y%m%d-%H%M%S')}.json"
    from harness.contracts.outfile import write_text

    return write_text(path, json.dumps([t.to_dict() for t in tallies], indent=2) + "\n")
