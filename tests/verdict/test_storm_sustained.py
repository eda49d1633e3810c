"""reconnect_storm's two rates on hand-written fleets (pure logic, no broker): a role that backs
off passes, a role that retries at a steady 4 a second (what lock-step retries reached at 1,000
members on two cores: under the 2 s bound of 9, over the 20 s bound of 2) fails, and is named."""

from __future__ import annotations

from typing import Any

from harness.verdict.checks.fleet import reconnect_storm
from tests.verdict.test_resubscribed import ROLE, consumer, rec, restored_log, view

MEMBERS = ["fleet-pair-0", "fleet-pair-1"]


def _failed(agent: str, times: list[float]) -> list[dict[str, Any]]:
    return [rec(agent, t, "disconnected", role=ROLE, reason="connect_failed: refused") for t in times]


def _fleet(times: list[float]) -> Any:
    logs = {m: [*restored_log(m)[:3], *_failed(m, times), *restored_log(m)[3:]] for m in MEMBERS}
    seen = [consumer(m, 1.05, "pair-1") for m in MEMBERS] + [consumer(m, 14.6, "pair-2") for m in MEMBERS]
    return view(logs, seen, fleet=True)


def test_backoff_passes_both_rates() -> None:
    c = reconnect_storm(_fleet([10.2, 10.4, 10.8, 11.6, 13.2]))
    assert c.ok, c.detail
    assert "over 20 s 0.25 per role (bound 2)" in c.detail
    assert c.measures["storm_sustained_per_role_s"] == [0.25]


def test_steady_retries_fail_the_sustained_rate_only() -> None:
    steady = [10.1 + 0.25 * i for i in range(80)]  # 4 a second for 20 s: 2 s peak 4, under 9
    c = reconnect_storm(_fleet(steady))
    assert c.status == "fail"
    assert [e["what"] for e in c.evidence] == [
        "8 connection attempts/s over 20 s from 2 roles (bound 2 per role: 4/s)"
    ]
    assert c.measures["storm_attempts_per_role_s"] == [4.0]
