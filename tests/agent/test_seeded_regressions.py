"""The seeded regressions' pacing is what their docstrings claim (pure: no brokers).

slow_backoff pauses 3x the reference's, eager_retry half of it, both still capped and jittered the
reference's way; eager_retry stays inside `bounded_retry` even at its densest (issue 43 item 4).
"""

from __future__ import annotations

import random

import pytest

from agent_under_test.config import AgentConf
from agent_under_test.defects import DEFECTS, REGRESSIONS, command, eager_retry, slow_backoff
from agent_under_test.reference.backoff import Backoff
from harness.verdict.checks.base import BOUNDS

DEFAULTS = AgentConf.model_fields["backoff_initial"].default, AgentConf.model_fields["backoff_cap"].default


def ceilings(b: Backoff, n: int) -> list[float]:
    """The upper ends d of the first n pauses (each pause is drawn in [d/2, d])."""
    out = []
    for _ in range(n):
        out.append(b._d)
        b.next()
    return out


@pytest.mark.parametrize(("module", "scale"), [(slow_backoff, 3.0), (eager_retry, 0.5)])
def test_pauses_are_the_reference_scaled(module, scale) -> None:
    ref = Backoff(*DEFAULTS, random.Random(1))
    seeded = module.backoff(*DEFAULTS, random.Random(1))
    want = [d * scale for d in ceilings(ref, 8)]
    got = ceilings(seeded, 8)
    assert got == pytest.approx(want)
    assert got[-1] == pytest.approx(DEFAULTS[1] * scale)  # capped at the scaled cap
    seeded = module.backoff(*DEFAULTS, random.Random(2))
    for _ in range(200):
        d = seeded._d
        assert d / 2 <= seeded.next() <= d  # jittered the reference's way


def densest_passes(b: Backoff, span: float) -> int:
    """Passes over mb.urls in the first `span` s of an outage (the densest window: no pause yet
    grew), one pass per pause ended."""
    t, n = 0.0, 1
    while (t := t + b.next()) <= span:
        n += 1
    return n


def test_eager_retry_twice_as_often_inside_bounded_retry() -> None:
    rng = random.Random(43)
    ref = [densest_passes(Backoff(*DEFAULTS, rng), 5.0) for _ in range(2000)]
    eager = [densest_passes(eager_retry.backoff(*DEFAULTS, rng), 5.0) for _ in range(2000)]
    ratio = sum(eager) / sum(ref)
    assert 1.5 < ratio < 2.2, ratio
    # each pass fails once per URL: the bound is per URL per second over any 5 s
    assert max(eager) / 5.0 < BOUNDS["retry_per_url_s"], max(eager)


def test_regressions_are_not_gate_defects() -> None:
    assert set(REGRESSIONS) == {"slow_backoff", "eager_retry"}
    assert not set(REGRESSIONS) & set(DEFECTS)  # they keep every promise: no gate test expects a failure
    assert command("slow_backoff").startswith("{python} -m agent_under_test.defects.slow_backoff ")
