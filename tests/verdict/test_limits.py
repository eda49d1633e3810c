"""The policy's limits as the verdict's checker inputs (harness/verdict/checks/limits.py), and
"not applicable" as a checker's own result (checks/applicable.py): pure logic on summaries and
run records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.verdict.checks.applicable import applicable
from harness.verdict.checks.counts import at_least_once, integrity, no_downgrade, policy
from harness.verdict.checks.limits import anomalies
from harness.verdict.view import RunView

BASE: dict[str, Any] = {"totals": {"attempted": 3, "acknowledged": 3}, "deliveries": {}, "ghosts": {}}


def _view(summary: dict[str, Any], run: dict[str, Any] | None = None, records: Any = None) -> RunView:
    return RunView(Path("/nonexistent"), summary, run or {}, records or {}, [])


def test_counts_over_the_recorded_limits_are_violations() -> None:
    s = {
        **BASE,
        "deliveries": {"lost": 1, "duplicated": 4},
        "examples": {"lost": ["m1"], "duplicated": ["d"]},
    }
    over, reported = anomalies(s)  # default policy: no lost, duplicates reported only
    assert [(o["kind"], o["count"], o["limit"], o["examples"]) for o in over] == [("lost", 1, 0, ["m1"])]
    assert [r["kind"] for r in reported] == ["duplicated"]
    assert at_least_once(_view(s)).status == "fail" and policy(_view(s)).ok
    strict = {**s, "policy": {"max_duplicates": 3, "max_lost": 1}}
    assert at_least_once(_view(strict)).ok and policy(_view(strict)).status == "fail"


def test_integrity_downgrade_and_vacuous_limits() -> None:
    s = {
        **BASE,
        "unexpected": 2,
        "ghosts": {"timeout": 1},
        "downgrades": [
            {"agent": "p", "kind": "publish", "topic": "t", "asked": {"qos": 1}, "got": {"qos": 0}}
        ],
        "faults": [{"fault_id": "f1", "vacuous": True}],
    }
    assert integrity(_view(s)).count == 3
    down = no_downgrade(_view(s))
    assert down.status == "fail" and "published t at QoS 0" in down.detail
    assert policy(_view(s)).ok  # a vacuous window is reported unless the policy fails on it
    assert policy(_view({**s, "policy": {"fail_on_vacuous": True}})).status == "fail"


def test_a_summary_of_the_old_code_gives_its_examples_from_its_reasons() -> None:
    old = {**BASE, "deliveries": {"lost": 1}, "reasons": [{"kind": "lost", "count": 1, "examples": ["m9"]}]}
    assert anomalies(old)[0][0]["examples"] == ["m9"]


RUN = {
    "agents": [{"name": "a", "conf": {"mb.urls": "ssl://127.0.0.1:1,ssl://127.0.0.1:2"}}],
    "observations": {"agents_exited_early": ["a"], "agent_exit": {"a": 2}},
}


def test_an_agent_refusing_its_ssl_urls_makes_the_run_not_applicable() -> None:
    c = applicable(_view(BASE, RUN))
    assert c.status == "n/a" and "ssl://" in c.detail and c.evidence[0]["agent"] == "a"


def test_applicable_reads_the_records_not_the_console() -> None:
    assert applicable(_view(BASE, RUN, {"a": [{"event": "connected", "ts": 1.0}]})).status == "pass"
    clean = {**RUN, "observations": {"agents_exited_early": ["a"], "agent_exit": {"a": 0}}}
    assert applicable(_view(BASE, clean)).status == "pass"  # exit 0: no refusal
    plain = {**RUN, "agents": [{"name": "a", "conf": {"mb.urls": "127.0.0.1:1"}}]}
    assert applicable(_view(BASE, plain)).status == "pass"  # nothing optional to refuse: a crash
