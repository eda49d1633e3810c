"""OLD against NEW, two scorecards (harness/contracts/scorecard.py): every measure and promise of
every entry, judged `better`, `same`, `worse` or `not enough rounds` (docs/compare.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.compare import stats
from harness.compare.inputs import CompareError, identity, load_side
from harness.compare.results import BETTER, FEW, SAME, WORSE, Comparison, MeasureRow, PromiseRow, Side
from harness.compare.tolerance import Tolerances, default
from harness.contracts.scorecard import MEASURES, Scorecard, base_name

Rounds = list[Mapping[str, Any]]


def compare(
    old: Scorecard | Mapping[str, Any] | str | Path,
    new: Scorecard | Mapping[str, Any] | str | Path,
    tolerances: Tolerances | None = None,
    alpha: float = stats.ALPHA,
) -> Comparison:
    """Compare two scorecards (a Scorecard, its JSON dict, or a path: a scorecard file, a run
    folder, a folder of run folders; CompareError when one cannot be read). Entries or seeds that
    differ are `problems` (exit 2); otherwise every measure and promise is judged. Measure names
    this harness does not know (a newer one's) are left out, as the schema asks."""
    o, n = load_side(old), load_side(new)
    tol = tolerances or Tolerances()
    out = Comparison(identity(o), identity(n), alpha=alpha, tolerance_source=tol.source)
    old_entries, new_entries = _entries(o), _entries(n)
    for name, entries in (("OLD", old_entries), ("NEW", new_entries)):
        _check_values(name, entries)
    out.problems = _mismatch(old_entries, new_entries) or _unjudged(old_entries, new_entries, alpha)
    if out.problems:
        return out
    for entry in sorted(old_entries):
        a, b = old_entries[entry], new_entries[entry]
        out.measures += [_measure_row(entry, m, a, b, tol) for m in _names(a, b, "measures")]
        out.promises += [_promise_row(entry, p, a, b) for p in _names(a, b, "promises")]
    _judge(out)
    out.problems = [_never_reached(m) for m in out.measures if _never_reached(m)]
    return out


def _check_values(side: str, entries: dict[str, Rounds]) -> None:
    """NaN (or -Infinity) is no value of a measure: an error naming its round. +Infinity is one,
    the worst (the thing never happened: never recovered)."""
    for entry, rounds in entries.items():
        for r in rounds:
            for name, values in (r.get("measures") or {}).items():
                for v in values if isinstance(values, list) else [values]:
                    if isinstance(v, int | float) and (math.isnan(v) or v == -math.inf):
                        raise CompareError(
                            f"{side}: entry {entry}, round {r.get('run_id')} (seed {r.get('seed')}): "
                            f"measure {name} is {v}, not a value (Infinity is: never reached)"
                        )


def _judged(rounds: Rounds) -> int:
    """Rounds a judge gave a verdict (not `error`: never judged; not `unknown`: a checker crashed)."""
    return sum(str(r.get("verdict")) not in ("error", "unknown") for r in rounds)


def _unjudged(old: dict[str, Rounds], new: dict[str, Rounds], alpha: float) -> list[str]:
    """An entry with fewer judged rounds on a side than the fewest any test needs: nothing it
    holds can pass or fail (a side never judged is no evidence of no regression)."""
    needed = stats.rounds_needed(alpha)
    out = []
    for entry in sorted(old):
        for name, rounds in (("OLD", old[entry]), ("NEW", new[entry])):
            if (judged := _judged(rounds)) < needed:
                out.append(
                    f"{entry}: {name} has {judged} judged round(s) of {len(rounds)}; "
                    f"at least {needed} rounds per side are needed"
                )
    return out


def _never_reached(m: MeasureRow) -> str:
    """A NEW side that never reached a measure (Infinity) in some round passes no comparison: it
    is a regression when shown worse, else the comparison cannot say (exit 2), never `same`."""
    k = sum(math.isinf(x) for x in m.new.rounds)
    if not k or m.verdict == WORSE:
        return ""
    return (
        f"{m.entry} {m.measure}: NEW never reached it (Infinity) in {k} of {len(m.new.rounds)} rounds, "
        f"and the rounds do not show it worse than OLD ({m.verdict})"
    )


def _entries(card: Mapping[str, Any]) -> dict[str, Rounds]:
    out: dict[str, Rounds] = {}
    for e in card.get("entries") or []:
        out.setdefault(str(e.get("entry")), []).extend(e.get("rounds") or [])
    return out


def _seeds(rounds: Rounds) -> list[str]:
    return sorted(str(r.get("seed")) for r in rounds)


def _mismatch(old: dict[str, Rounds], new: dict[str, Rounds]) -> list[str]:
    """Why these two cannot be compared: other entries, other seeds, no round at all."""
    problems = []
    if set(old) != set(new):
        only_old, only_new = sorted(set(old) - set(new)), sorted(set(new) - set(old))
        problems.append(
            "different entries: "
            + "; ".join(
                x
                for x in (
                    f"only in OLD: {', '.join(only_old)}" if only_old else "",
                    f"only in NEW: {', '.join(only_new)}" if only_new else "",
                )
                if x
            )
        )
    for entry in sorted(set(old) & set(new)):
        so, sn = _seeds(old[entry]), _seeds(new[entry])
        if so != sn:
            problems.append(f"{entry}: different seeds (OLD {', '.join(so)}; NEW {', '.join(sn)})")
    if not problems and not any(old.values()):
        problems.append("no round on either side")
    return problems


def _names(a: Rounds, b: Rounds, key: str) -> list[str]:
    """The promises, or the measures by base name (their roles together); measure names this
    harness does not know are left out."""
    found = {str(k) for r in (*a, *b) for k in (r.get(key) or {})}
    if key == "measures":
        return sorted({base_name(k) for k in found if base_name(k) in MEASURES})
    return sorted(found)


def _values(values: Any) -> list[float]:
    """The numbers of a measure: finite or +Infinity (never reached: the worst value)."""
    if isinstance(values, int | float) and not isinstance(values, bool):
        values = [values]
    out = []
    for v in values or []:
        try:
            x = float(v)
        except (TypeError, ValueError):
            continue
        if not math.isnan(x) and x != -math.inf:
            out.append(x)
    return out


def _ranked(m: MeasureRow) -> tuple[list[float], list[float], float]:
    """OLD's and NEW's round values for the tests, +Infinity as a finite value above every other
    by far more than the tolerance (the rank tests see it as the worst, as it is), and that far."""
    finite = [x for x in (*m.old.rounds, *m.new.rounds) if math.isfinite(x)]
    top, low = max(finite, default=0.0), min(finite, default=0.0)
    far = 1e6 * (top - low + abs(top) + m.tolerance + 1.0)

    def sub(xs: list[float]) -> list[float]:
        return [x if math.isfinite(x) else top + far for x in xs]

    return sub(m.old.rounds), sub(m.new.rounds), far


def _unbounded(x: float, far: float) -> float:
    """A shift or interval end that only the substitute for +Infinity reaches is infinite."""
    return math.copysign(math.inf, x) if abs(x) >= far / 2 else x


def _side(rounds: Rounds, measure: str) -> tuple[Side, set[str]]:
    """One side of a measure, every role of it together, and the names (roles) it came under.
    Each round's value is the median of its samples (every role, fault window, member): the round
    is the unit the tests count, since the samples of one round share its takeover and its
    machine's load; its samples make the round's value sharper, not the test's count larger."""
    s, names = Side(), set[str]()
    for r in rounds:
        xs: list[float] = []
        for name, values in (r.get("measures") or {}).items():
            if base_name(str(name)) == measure:
                names.add(str(name))
                xs += _values(values)
        if xs:
            s.rounds.append(stats.median(xs))
            s.samples += xs
    if s.samples:
        s.median, s.p95 = stats.median(s.samples), stats.p95(s.samples)
    return s, names


def _measure_row(entry: str, measure: str, a: Rounds, b: Rounds, tol: Tolerances) -> MeasureRow:
    (old, on), (new, nn) = _side(a, measure), _side(b, measure)
    t = tol.of(measure)
    reached = [x for x in old.rounds if math.isfinite(x)]
    allowance = t.allowance(stats.median(reached)) if reached else t.absolute
    row = MeasureRow(entry, measure, default(measure)[0], old, new, allowance, t.text())
    row.names = sorted(on | nn)
    return row


def _promise_row(entry: str, promise: str, a: Rounds, b: Rounds) -> PromiseRow:
    def count(rounds: Rounds) -> tuple[int, int]:
        statuses = [str((r.get("promises") or {}).get(promise)) for r in rounds]
        return statuses.count("fail"), sum(s in ("pass", "fail") for s in statuses)

    (ob, oj), (nb, nj) = count(a), count(b)
    return PromiseRow(entry, promise, ob, oj, nb, nj)


def _constant(row: MeasureRow) -> bool:
    values = {*row.old.rounds, *row.new.rounds}
    return bool(row.old.rounds and row.new.rounds) and len(values) == 1


def _settled(row: PromiseRow) -> bool:
    """Nothing to test: broken in no round of either side (kept, or never judged: n/a), or broken
    in every judged round of both."""
    if row.old_broken + row.new_broken == 0:
        return True
    return row.old_broken == row.old_judged and row.new_broken == row.new_judged


def _judge(out: Comparison) -> None:
    """The family first (which rows can reach alpha / K at all), then each row at that level."""
    measures = [m for m in out.measures if not _constant(m)]
    promises = [p for p in out.promises if not _settled(p)]
    m_floor = {id(m): stats.reachable_p(*_ranked(m)[:2], m.tolerance) for m in measures}
    p_floor = {
        id(p): stats.promise_reachable((p.old_broken, p.old_judged), (p.new_broken, p.new_judged))
        for p in promises
    }
    family = stats.Family.of([*m_floor.values(), *p_floor.values()], out.alpha)
    out.family, out.level = family.size, family.level
    # a row that cannot reach the level needs the rounds that could, were it counted too
    needed_level = out.alpha / max(len(m_floor) + len(p_floor), 1)
    for m in measures:
        n_old, n_new = len(m.old.rounds), len(m.new.rounds)
        if family.reachable(m_floor[id(m)]):
            _test_measure(m, family.level)
        elif family.reachable(stats.rank_floor(n_old, n_new)):  # rounds enough, tied values not
            o, n, far = _ranked(m)
            m.shift = _unbounded(stats.hodges_lehmann(o, n), far)
            m.verdict, m.why = SAME, "tied values that could not show a regression however they fell"
        else:
            _too_few(m, n_old, n_new, stats.rounds_needed(needed_level))
    for p in promises:
        if family.reachable(p_floor[id(p)]):
            _test_promise(p, family.level)
        elif family.reachable(stats.promise_floor(p.old_judged, p.new_judged)):
            p.verdict = SAME  # rounds enough; too few broken ones to be a regression however they fell
        else:
            _too_few(p, p.old_judged, p.new_judged, stats.rounds_needed(needed_level, stats.promise_floor))
    for m in out.measures:
        if _constant(m):
            m.shift, m.ci, m.why = 0.0, (0.0, 0.0), "the same value in every round of both sides"


def _too_few(row: MeasureRow | PromiseRow, n_old: int, n_new: int, needed: int) -> None:
    row.verdict, row.rounds_needed = FEW, needed
    if isinstance(row, MeasureRow):
        row.why = f"{n_old} old and {n_new} new rounds measured it; {needed} per side are needed"


def _test_measure(m: MeasureRow, level: float) -> None:
    o, n, far = _ranked(m)
    m.shift = _unbounded(stats.hodges_lehmann(o, n), far)
    lo, hi = stats.shift_interval(o, n, level)
    m.ci = (_unbounded(lo, far), _unbounded(hi, far))
    m.confidence = round(1 - 2 * level, 6)
    m.p_worse = stats.shift_p(o, n, m.tolerance, "greater")
    m.p_better = stats.shift_p(o, n, -m.tolerance, "less")
    if m.p_worse <= level:
        m.verdict, m.why = WORSE, f"worse by more than {m.tolerance:.3g} (p = {m.p_worse:.2g} <= {level:.2g})"
    elif m.p_better <= level:
        m.verdict, m.why = BETTER, f"better by more than {m.tolerance:.3g} (p = {m.p_better:.2g})"
    else:
        m.verdict, m.why = SAME, f"within {m.tolerance:.3g} as far as {len(o)} + {len(n)} rounds tell"


def _test_promise(p: PromiseRow, level: float) -> None:
    old, new = (p.old_broken, p.old_judged), (p.new_broken, p.new_judged)
    p.p_worse = stats.promise_p(old, new, "greater")
    p.p_better = stats.promise_p(old, new, "less")
    p.verdict = WORSE if p.p_worse <= level else BETTER if p.p_better <= level else SAME


__all__ = ["BETTER", "CompareError", "FEW", "SAME", "WORSE", "Comparison", "compare"]
