"""The comparison's statistics on hand-made rounds (pure: no brokers, milliseconds each)."""

from __future__ import annotations

import math
import random

import pytest

from harness.compare import FEW, SAME, WORSE, compare, stats
from harness.compare.tolerance import Tolerance, Tolerances
from tests.compare.cards import REF, SLOW, card, recovery

TIGHT = [2.0, 2.02, 2.04, 2.06, 2.08]  # rounds that hardly vary


def test_identical_rounds_are_the_same() -> None:
    c = compare(card(recovery(REF)), card(recovery(REF)))
    (row,) = c.measures
    assert row.verdict == SAME
    assert row.shift == 0.0
    assert row.ci is not None and row.ci[0] <= 0.0 <= row.ci[1]
    assert c.exit_code == 0 and not c.regressions


def test_clearly_slower_is_worse_with_the_interval_above_the_tolerance() -> None:
    c = compare(card(recovery(REF)), card(recovery(SLOW)))
    (row,) = c.measures
    assert row.verdict == WORSE
    assert row.tolerance == pytest.approx(max(0.25 * 2.2, 0.5))  # recovery: +25 % of OLD's median, or 0.5 s
    assert row.ci is not None and row.ci[0] > row.tolerance
    assert row.shift == pytest.approx(4.3, abs=0.3)
    assert c.exit_code == 1 and c.regressions == [row]


def test_faster_is_better() -> None:
    c = compare(card(recovery(SLOW)), card(recovery(REF)))
    assert [m.verdict for m in c.measures] == ["better"]
    assert c.exit_code == 0


def test_slower_within_the_tolerance_is_the_same() -> None:
    # every new round 0.3 s slower: certain, but inside the 0.5 s allowance
    c = compare(card(recovery(TIGHT)), card(recovery([x + 0.3 for x in TIGHT])))
    (row,) = c.measures
    assert row.verdict == SAME
    assert row.ci is not None and row.ci[0] > 0  # slower for sure ...
    assert row.ci[0] <= row.tolerance  # ... but not by more than the tolerance


def test_a_tighter_tolerance_from_the_project_flags_it() -> None:
    tight = Tolerances({"recovery_s": Tolerance(0.0, 0.1)})
    c = compare(card(recovery(TIGHT)), card(recovery([x + 0.3 for x in TIGHT])), tight)
    assert [m.verdict for m in c.measures] == [WORSE]


def test_too_few_rounds_say_how_many_are_needed() -> None:
    # 2 + 2 rounds: the best possible p is 1/6; one test at 0.05 needs 1/C(2n, n) <= 0.05: n = 3
    c = compare(card(recovery(REF[:2])), card(recovery(SLOW[:2])))
    assert c.exit_code == 2 and "3 rounds per side" in c.summary() and not c.measures
    # 3 + 3 rounds reach 0.05, but not the 0.025 two measures share: each row says so
    lat = {"publish_latency_p95_s": lambda i: [0.02 + 0.001 * i]}
    c = compare(card(recovery(REF[:3], **lat)), card(recovery(SLOW[:3], **lat)))
    row = next(m for m in c.measures if m.measure == "recovery_s")
    assert row.verdict == FEW and row.rounds_needed == 4 and "4 per side" in row.why
    assert c.exit_code == 2 and "4 rounds per side" in c.summary()


def test_rounds_needed_follow_the_number_of_tests() -> None:
    assert stats.rounds_needed(0.05) == 3  # 1/20
    assert stats.rounds_needed(0.05 / 12) == 5  # 1/252 <= 0.00417
    assert stats.rounds_needed(0.05 / 13) == 6  # 1/252 > 0.00385; 1/924
    assert stats.rank_floor(5, 5) == pytest.approx(1 / 252)


def _shifted_by_one_pair() -> tuple[list[float], list[float]]:
    """New above old by far, except one of the 25 new-old pairs: U = 24, p = 2/252 = 0.0079."""
    old = [1.0, 1.1, 1.2, 1.3, 5.0]
    new = [4.9, 6.0, 6.1, 6.2, 6.3]
    return old, new


def test_many_measures_at_once_need_stronger_evidence() -> None:
    old, new = _shifted_by_one_pair()
    tol = Tolerances({"recovery_s": Tolerance(0.0, 0.01)})
    alone = compare(card(recovery(old)), card(recovery(new)), tol)
    assert alone.family == 1 and [m.verdict for m in alone.measures] == [WORSE]  # 0.0079 <= 0.05

    def noise(i: int) -> list[float]:
        return [random.Random(i).uniform(0.01, 0.02)]

    many = {f"publish_latency_p{q}_s": noise for q in (50, 95)} | {"takeover_to_delivery_s": noise}
    more = {**many, "failed_attempts_per_s[publisher]": noise, "fleet_recovery_p50_s": noise}
    more |= {"storm_all_back_s": noise, "storm_attempts_per_role_s": noise}
    c = compare(card(recovery(old, **more)), card(recovery(new, **more)), tol)
    assert c.family == 8 and c.level == pytest.approx(0.05 / 8)
    (rec,) = [m for m in c.measures if m.measure == "recovery_s"]
    assert rec.p_worse == pytest.approx(2 / 252)
    assert rec.verdict == SAME  # 0.0079 > 0.05 / 8: not certain once eight measures may err


def test_a_measure_equal_in_every_round_does_not_count() -> None:
    zeros = {"duplicates": lambda i: [0.0], "dropped_at_timeout": lambda i: [0.0]}
    c = compare(card(recovery(REF, **zeros)), card(recovery(SLOW, **zeros)))
    assert c.family == 1  # Tarone: the counts cannot be worse, so they spend none of the 5 %
    assert {m.measure: m.verdict for m in c.measures} == {
        "dropped_at_timeout": SAME,
        "duplicates": SAME,
        "recovery_s": WORSE,
    }


def test_roles_are_samples_of_one_round() -> None:
    rounds = [{"recovery_s[publisher]": [v], "recovery_s[subscriber:a]": [v + 0.2, v + 0.4]} for v in REF]
    c = compare(card(rounds), card(rounds))
    (row,) = c.measures
    assert row.names == ["recovery_s[publisher]", "recovery_s[subscriber:a]"]
    assert len(row.old.rounds) == 5 and len(row.old.samples) == 15  # rounds count, not samples


def test_unknown_measure_names_are_left_out() -> None:
    more = {"some_future_measure_s": lambda i: [1.0]}
    c = compare(card(recovery(REF, **more)), card(recovery(REF, **more)))
    assert [m.measure for m in c.measures] == ["recovery_s"]


def test_the_interval_agrees_with_the_verdict() -> None:
    rng = random.Random(43)
    for _ in range(15):
        old = [rng.uniform(1, 3) for _ in range(5)]
        new = [rng.uniform(1, 3) + rng.choice([0, 1, 3]) for _ in range(5)]
        (row,) = compare(card(recovery(old)), card(recovery(new))).measures
        assert row.ci is not None
        assert (row.verdict == WORSE) == (row.ci[0] > row.tolerance), (old, new, row.ci)
        assert (row.verdict == "better") == (row.ci[1] < -row.tolerance)
        assert row.ci[0] <= row.shift <= row.ci[1]


def test_tied_values_are_tested_exactly() -> None:
    assert stats.shift_p([0.0] * 5, [3.0] * 5, 1.0, "greater") == pytest.approx(1 / 252)
    assert stats.shift_p([0.0] * 5, [0.0] * 5, 0.0, "greater") == 1.0
    lo, hi = stats.shift_interval([0.0] * 3, [1.0] * 3, 0.05 / 2)
    assert math.isinf(lo) and math.isinf(hi)  # 3 + 3 rounds cannot exclude any shift at 2.5 %


def test_a_promise_broken_in_more_new_rounds_is_a_regression() -> None:
    kept = [{"recovery": "pass", "at_least_once": "pass"}] * 5
    broken = [{"recovery": "pass", "at_least_once": "fail"}] * 5
    c = compare(card(recovery(REF), promises=kept), card(recovery(REF), promises=broken))
    (p,) = [p for p in c.promises if p.promise == "at_least_once"]
    assert p.verdict == WORSE and p.newly_broken
    assert p.p_worse == pytest.approx(1 / 1024)  # Boschloo: 5/5 against 0/5
    assert c.exit_code == 1 and c.regressions == [p]
    assert "at_least_once" in c.summary()
    back = compare(card(recovery(REF), promises=broken), card(recovery(REF), promises=kept))
    (q,) = [p for p in back.promises if p.promise == "at_least_once"]
    assert q.newly_kept and q.verdict == "better" and back.exit_code == 0


def test_a_promise_broken_once_more_is_not_yet_a_regression() -> None:
    kept = [{"recovery": "pass"}] * 5
    once = [{"recovery": "fail"}] + [{"recovery": "pass"}] * 4
    c = compare(card(recovery(REF), promises=kept), card(recovery(REF), promises=once))
    (p,) = c.promises
    assert p.newly_broken and p.verdict == SAME  # 1 of 5 against 0 of 5: listed, not certain
    assert c.exit_code == 0


def test_different_entries_or_seeds_cannot_be_compared() -> None:
    c = compare(card(recovery(REF)), card(recovery(REF), entry="stop-master"))
    assert c.exit_code == 2 and "different entries" in c.problems[0]
    c = compare(card(recovery(REF)), card(recovery(REF), seeds=[1, 2, 3, 4, 6]))
    assert c.exit_code == 2 and "different seeds" in c.problems[0]


def test_false_alarms_stay_under_5_percent_at_the_edge_of_the_tolerance() -> None:
    """The worst case for false alarms: every one of five measures exactly the tolerance slower
    (anything less is rarer still, the reference against itself far rarer). 400 simulated
    comparisons of 5 + 5 skewed rounds: by the statistics at most 3.9 % flag any measure in
    expectation (1 - (1 - 2/252) ** 5); the bound below leaves 3 standard deviations of the
    simulation's own noise."""
    rng = random.Random(20)
    family = stats.Family.of([stats.rank_floor(5, 5)] * 5)
    tol = 0.5
    alarms = 0
    for _ in range(400):
        flagged = False
        for _ in range(5):
            old = [rng.lognormvariate(1.0, 0.4) for _ in range(5)]
            new = [rng.lognormvariate(1.0, 0.4) + tol for _ in range(5)]
            flagged |= stats.shift_p(old, new, tol, "greater") <= family.level
        alarms += flagged
    assert alarms / 400 <= 0.07, alarms


def test_a_promise_never_judged_is_nothing_to_test() -> None:
    na = [{"recovery": "pass", "fleet_recovery": "n/a"}] * 5
    c = compare(card(recovery(REF), promises=na), card(recovery(REF), promises=na))
    assert {p.promise: p.verdict for p in c.promises} == {"fleet_recovery": SAME, "recovery": SAME}


def test_a_busier_side_is_noted() -> None:
    old, new = card(recovery(REF)), card(recovery(REF))
    for r in new["entries"][0]["rounds"]:
        r["load"] = {"load_avg_max": 9.0}
    c = compare(old, new)
    assert c.load_note is not None and c.load_note.startswith("NEW ran on a busier machine")
    assert compare(old, old).load_note is None


def test_sporadic_counts_spend_nothing_and_are_the_same() -> None:
    """Drops in one NEW round of five: however those tied values fell, no arrangement could be
    flagged at 5 % over four measures, so they do not count (Tarone) and are `same`."""

    def noise(i: int) -> list[float]:
        return [random.Random(i).uniform(0.01, 0.02)]

    more = {"publish_latency_p50_s": noise, "publish_latency_p95_s": noise}
    old = recovery(REF, **more, dropped_at_timeout=lambda i: [0.0])
    new = recovery(SLOW, **more, dropped_at_timeout=lambda i: [3.0 if i == 4 else 0.0])
    c = compare(card(old), card(new))
    assert c.family == 3
    verdicts = {m.measure: m.verdict for m in c.measures}
    assert verdicts["dropped_at_timeout"] == SAME and verdicts["recovery_s"] == WORSE
    assert c.exit_code == 1


def test_a_promise_broken_once_spends_nothing() -> None:
    old, new = _shifted_by_one_pair()
    tol = Tolerances({"recovery_s": Tolerance(0.0, 0.01)})
    kept = [{"at_least_once": "pass"}] * 5
    once = [{"at_least_once": "fail"}] + kept[1:]
    c = compare(card(recovery(old), promises=kept), card(recovery(new), promises=once), tol)
    assert c.family == 1  # one broken round of ten could never be a regression: not counted
    assert [m.verdict for m in c.measures] == [WORSE]
    assert c.promises[0].newly_broken and c.promises[0].verdict == SAME
