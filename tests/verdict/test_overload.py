"""The overload rule (harness/verdict/overload.py) on hand-written runs and load samples (pure):
a timing promise broken within the reach of a measured overload is `unknown`, one broken far
beyond it (a seeded defect's breach, a `never`) stays `fail`."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.contracts import loadlog
from harness.pytest_plugin.conformance.test_catalog import assert_verdict
from harness.verdict import RunView, judge
from harness.verdict.checks import Check, liveness, publish_latency
from harness.verdict.checks.base import Breach
from harness.verdict.overload import RERUN, apply, judge_check
from harness.verdict.view import Window
from tests.verdict.test_checks import HEALTHY, RUN, SUMMARY, A, r

QUIET = 0.004  # the probe's worst oversleep beside `stress-ng --cpu 2` (measured)


def samples(tmp_path: Path, stalls: dict[float, float], until: float = 40.0, brokers=None, load=None) -> None:
    """One sample a second on 2 cores; `stalls`: ts -> the probe's delay at that sample; `load`:
    ts -> the 1-minute load average (2.5 otherwise: beside `stress-ng --cpu 2`)."""
    rows = [
        {
            "ts": float(t),
            "probe_max_s": stalls.get(float(t), QUIET),
            "probe_sum_s": stalls.get(float(t), QUIET),
            "probe_n": 9,
            "proxy_s": 0.002,
            "brokers": (brokers or {}).get(float(t), {"pair-1": 0.003, "pair-2": None}),
            "load1": (load or {}).get(float(t), 2.5),
            "cpus": 2,
        }
        for t in range(int(until))
    ]
    loadlog.write(tmp_path, rows)


def view(tmp_path: Path, records: list[dict[str, Any]], faults: list[Window] = ()) -> RunView:
    return RunView(tmp_path, dict(SUMMARY), RUN, {"a": records}, list(faults))


def noticed(after: float | None) -> list[dict[str, Any]]:
    """Both roles give up their connections to pair-1 `after` s past a fault at 2.0 (None: never)."""
    out = [*HEALTHY]
    if after is not None:
        out += [
            r(2.0 + after, "disconnected", role=role, broker=A, reason="liveness")
            for role in ("subscriber:t/#", "publisher")
        ]
    return out


def paused_a() -> Window:
    return Window("f1", "pause", "pair-1", 2.0, 30.0)


def judged(tmp_path: Path, records: list[dict[str, Any]], faults: list[Window]) -> Check:
    v = view(tmp_path, records, faults)
    c = liveness(v)
    assert c.status == "fail"
    checks, _ = apply(v, [c], ["liveness"])
    return checks[0]


def test_a_breach_within_the_overload_is_unknown(tmp_path):
    samples(tmp_path, {11.0: 2.3})  # one 2.3 s stall while the subscriber was past its bound
    c = judged(tmp_path, noticed(9.5), [paused_a()])  # 1.5 s past the 8 s bound
    assert c.status == "unknown"
    assert c.evidence[0]["what"].startswith("machine overloaded: scheduling delay 2.3 s at ")
    assert c.evidence[0]["what"].endswith("(harness probe)") and RERUN in c.detail


def test_a_quiet_machine_or_a_stall_elsewhere_explains_nothing(tmp_path):
    samples(tmp_path, {})  # beside stress-ng --cpu 2: milliseconds
    assert judged(tmp_path, noticed(9.5), [paused_a()]).status == "fail"
    samples(tmp_path, {20.0: 2.3})  # after the subscriber gave up (11.5 s): no overlap
    assert judged(tmp_path, noticed(9.5), [paused_a()]).status == "fail"
    samples(tmp_path, {5.0: 2.3})  # inside the 8 s the bound allows: its own time, never excused
    assert judged(tmp_path, noticed(9.5), [paused_a()]).status == "fail"


def test_a_defects_breach_far_beyond_the_delay_still_fails(tmp_path):
    # heartbeat_liveness: 15-20 s to notice a silent broker; one 2.3 s stall explains 2.3 s of it
    samples(tmp_path, {5.0: 2.3})
    assert judged(tmp_path, noticed(17.0), [paused_a()]).status == "fail"
    # never noticed: no delay explains a `never`
    samples(tmp_path, {t: 2.0 for t in range(3, 30)})
    assert judged(tmp_path, noticed(None), [paused_a()]).status == "fail"
    # ... but a machine stalled 2 s of every second second explains 9 s (the sum is the reach)
    samples(tmp_path, {float(t): 2.0 for t in range(3, 19, 2)})
    assert judged(tmp_path, noticed(17.0), [paused_a()]).status == "unknown"


def test_a_slow_broker_is_the_brokers_finding_not_the_machines(tmp_path):
    # the paused broker's answers time out (1 s) every second of its pause: that is the fault
    paused = {float(t): {"pair-1": 1.0, "pair-2": 0.003} for t in range(2, 41)}
    samples(tmp_path, {}, brokers=paused)
    assert judged(tmp_path, noticed(9.5), [paused_a()]).status == "fail"
    # the other broker answering slowly with no fault on it: the broker's, it excuses nothing
    slow = {float(t): {"pair-1": 1.0, "pair-2": 1.0} for t in range(2, 41)}
    samples(tmp_path, {}, brokers=slow)
    v = view(tmp_path, noticed(9.5), [paused_a()])
    v.run = {**RUN, "brokers": {"pair-1": {"group": "pair"}, "pair-2": {"group": "other"}}}
    assert apply(v, [liveness(v)], ["liveness"])[0][0].status == "fail"
    samples(tmp_path, {11.0: 1.6}, brokers=slow)  # the harness's own probe: the machine
    c = apply(v, [liveness(v)], ["liveness"])[0][0]
    assert c.status == "unknown" and "(harness probe)" in c.evidence[0]["what"]


def test_ungated_or_passing_promises_and_runs_without_samples_are_left_alone(tmp_path):
    v = view(tmp_path, noticed(9.5), [paused_a()])
    c = liveness(v)
    assert apply(v, [c], ["at_least_once"]) == ([c], [])  # not gated
    assert judge_check(v, c, []) is c  # a folder from before the probe: no samples
    ok = liveness(view(tmp_path, noticed(3.0), [paused_a()]))
    assert apply(v, [ok], ["liveness"]) == ([ok], [])


def storm(rate: float) -> Check:
    """reconnect_storm's violation as checks/fleet.py fills it: 20 roles, bound 9 per role (180/s)."""
    what = f"{rate:g} connection attempts/s over 2 s from 20 roles (bound 9 per role: 180/s)"
    return Check(
        "reconnect_storm",
        "fail",
        1,
        [{"ts": 10.0, "what": what}],
        breaches=[Breach(8.0, 12.0, 2 * (rate / 180 - 1), rate=True)],
    )


def test_rates_read_as_the_time_their_attempts_would_need(tmp_path):
    v = view(tmp_path, HEALTHY)
    lockstep = storm(400)
    samples(tmp_path, {10.0: 0.6})  # lock-step: 400/s vs 180/s needs 2.4 s of stalls in [8, 12]
    assert judge_check(v, lockstep, loadlog_delays(v)).status == "fail"
    samples(tmp_path, {9.0: 1.3, 11.0: 1.3})
    assert judge_check(v, lockstep, loadlog_delays(v)).status == "unknown"
    burst = storm(200)
    samples(tmp_path, {10.0: 0.6})  # 200/s: 0.2 s of compression, within one 0.6 s stall
    assert judge_check(v, burst, loadlog_delays(v)).status == "unknown"
    # a run queue slows every thread alike: it explains lateness, never a rate
    samples(tmp_path, {}, load={float(t): 22.0 for t in range(40)})
    assert judge_check(v, burst, loadlog_delays(v)).status == "fail"
    # a violation its checker did not read as a breach (a hand-made check, a `never`) stays a fail
    samples(tmp_path, {9.0: 1.3, 11.0: 1.3})
    unread = Check("reconnect_storm", "fail", 1, [{"ts": 10.0, "what": "every agent back never"}])
    assert judge_check(v, unread, loadlog_delays(v)) is unread


def loadlog_delays(v: RunView):
    from harness.verdict.overload import delays

    return delays(v)


def test_the_judge_says_rerun_on_a_less_loaded_machine(tmp_path):
    d = tmp_path / "run"
    (d / "analysis").mkdir(parents=True)
    (d / "analysis" / "summary.json").write_text(json.dumps(SUMMARY))
    (d / "run.json").write_text(json.dumps({**RUN, "scenario": {"name": "t", "gates": ["publish_latency"]}}))
    slow = [*HEALTHY, r(2.0, "send_attempt", msg_id="m2", broker=A), r(9.0, "sent", msg_id="m2")]
    (d / "agents" / "a").mkdir(parents=True)
    (d / "agents" / "a" / "messages.jsonl").write_text("".join(json.dumps(x) + "\n" for x in slow))
    assert publish_latency(view(d, slow)).status == "fail"  # acknowledged 7 s after: 2 s past 5 s
    assert judge(d).verdict == "fail"  # no load samples: judged as before
    samples(d, {7.0: 1.2, 8.0: 1.2})  # while it was past its bound (7 s to 9 s)
    v = judge(d)
    assert v.verdict == "unknown" and v.broken == [] and v.check("publish_latency").status == "unknown"
    assert RERUN in v.message() and "machine overloaded: scheduling delay 1.2 s" in v.message()
    saved = json.loads((d / "analysis" / "verdict.json").read_text())
    assert saved["verdict"] == "unknown" and RERUN in saved["note"]
    # the conformance item: inconclusive fails, saying why; a skip only when asked for; never a pass
    with pytest.raises(pytest.fail.Exception, match="t: inconclusive: publish_latency: machine overloaded"):
        assert_verdict(SimpleNamespace(verdict=v, run_dir=d), "t")
    with pytest.raises(pytest.skip.Exception, match="less loaded machine"):
        assert_verdict(SimpleNamespace(verdict=v, run_dir=d), "t", unknown="skip")


def test_retries_are_read_over_their_densest_five_seconds(tmp_path):
    from harness.verdict.checks import bounded_retry

    # 0.1 s retries from 20 s to 30 s: 50 in 5 s against 40 (two URLs): 1.25 s of compression
    spin = [
        r(20 + i * 0.1, "disconnected", role="publisher", broker=A, reason="connect_failed: refused")
        for i in range(100)
    ]
    v = view(tmp_path, [*HEALTHY, *spin])
    c = bounded_retry(v)
    assert c.status == "fail"
    samples(tmp_path, {5.0: 2.0})  # long before the retries: not their overload
    assert apply(v, [c], ["bounded_retry"])[0][0].status == "fail"
    samples(tmp_path, {21.0: 1.5})  # inside the densest window
    assert apply(v, [c], ["bounded_retry"])[0][0].status == "unknown"


def test_connect_timeout_and_recovery_read_from_the_checkers_own_evidence(tmp_path):
    from harness.verdict.checks import connect_timeout, recovery

    late = [
        r(13.0, "connected", role="subscriber:t/#", broker=A),
        r(13.5, "connected", role="publisher", broker=A),
    ]
    v = view(tmp_path, late)
    c = connect_timeout(v)  # 3.5 s past the 10 s grace of a launch at 0
    samples(tmp_path, {10.0: 2.0, 12.0: 2.0})  # past the grace (10 s to 13.5 s)
    assert apply(v, [c], ["connect_timeout"])[0][0].status == "unknown"
    samples(tmp_path, {4.0: 2.0, 8.0: 2.0})  # inside the grace: the bound's own time
    assert apply(v, [c], ["connect_timeout"])[0][0].status == "fail"
    samples(tmp_path, {10.0: 2.0})  # 2 s of stall cannot explain 3.5 s
    assert apply(v, [c], ["connect_timeout"])[0][0].status == "fail"
    part = Window("f1", "partition", "pair-1", 2.0, 6.0)
    slow = [
        *HEALTHY,
        r(3.0, "disconnected", role="subscriber:t/#", broker=A, reason="liveness"),
        r(38.0, "subscribed", topic="t/#", broker=A),  # back 2 s past the 30 s bound
        r(60.0, "received", msg_id="z"),
    ]
    v = view(tmp_path, slow, [part])
    c = recovery(v)
    assert c.status == "fail"
    samples(tmp_path, {37.0: 2.5}, until=70)  # past the bound (36 s to 38 s)
    assert apply(v, [c], ["recovery"])[0][0].status == "unknown"
    samples(tmp_path, {20.0: 2.5}, until=70)  # within the 30 s the bound allows: not excused
    assert apply(v, [c], ["recovery"])[0][0].status == "fail"
    never = view(tmp_path, slow[:-2] + slow[-1:], [part])  # never back: stays a fail
    assert apply(never, [recovery(never)], ["recovery"])[0][0].status == "fail"


def test_recovery_reads_back_as_its_checker_does(tmp_path):
    from harness.verdict.checks import recovery

    part = Window("f1", "partition", "pair-1", 2.0, 6.0)
    # reconnected at once but subscribed again only 38 s after the fault's end: back is 44.0
    slow = [
        *HEALTHY,
        r(3.0, "disconnected", role="subscriber:t/#", broker=A, reason="liveness"),
        r(7.0, "connected", role="subscriber:t/#", broker=A),
        r(44.0, "subscribed", topic="t/#", broker=A),
        r(60.0, "received", msg_id="z"),
    ]
    v = view(tmp_path, slow, [part])
    c = recovery(v)
    assert c.status == "fail"
    samples(tmp_path, {8.0: 2.5}, until=70)  # explains 2.5 s, not the 8 s past the bound
    assert apply(v, [c], ["recovery"])[0][0].status == "fail"


# -- a starved machine whose sleepers still wake on time (issue 42: the ops example's baseline) --
def slow_publish(d: Path, latency: float) -> list[dict[str, Any]]:
    return [*HEALTHY, r(20.0, "send_attempt", msg_id="m2", broker=A), r(20.0 + latency, "sent", msg_id="m2")]


def test_a_starved_run_queue_explains_a_late_ack(tmp_path):
    # the fresh-clone extended tier: acks 5.5 s late at load average 22 on 2 cores, the probe's
    # oversleep under 0.5 s the whole time
    late = slow_publish(tmp_path, 5.5)
    v = view(tmp_path, late)
    c = publish_latency(v)
    assert c.status == "fail" and c.breaches == [Breach(20.0, 25.5, 0.5)]
    samples(tmp_path, {t: 0.3 for t in range(40)}, load={float(t): 22.0 for t in range(40)})
    got = apply(v, [c], ["publish_latency"])[0][0]
    assert got.status == "unknown" and RERUN in got.detail
    assert got.evidence[0]["what"].startswith(
        "machine overloaded: run queue 11.0 per core (load average 22.0 on 2 cores)"
    )
    assert got.breaches == c.breaches and got.measures == c.measures  # the rest of the check kept


def test_a_busy_queue_below_the_threshold_explains_nothing(tmp_path):
    # beside `stress-ng --cpu 2` the harness's runs stay at load <= 8 on 2 cores (4 per core)
    v = view(tmp_path, slow_publish(tmp_path, 5.5))
    samples(tmp_path, {}, load={float(t): 8.0 for t in range(40)})
    assert apply(v, [publish_latency(v)], ["publish_latency"])[0][0].status == "fail"
    # a folder whose samples lack `cpus` (before it was recorded): no run queue per core, as before
    rows = [{k: x for k, x in row.items() if k != "cpus"} | {"load1": 22.0} for row in loadlog.read(tmp_path)]
    loadlog.write(tmp_path, rows)
    assert apply(v, [publish_latency(v)], ["publish_latency"])[0][0].status == "fail"


def test_a_defects_breach_beyond_the_starved_reach_still_fails(tmp_path):
    from harness.verdict.checks import connect_timeout

    # no_connect_timeout: first connection 30 s after launch, 20 s past the grace; 12 runnable per
    # core for 3 s near it take at most 2.75 s
    late = [
        r(30.0, "connected", role="subscriber:t/#", broker=A),
        r(30.5, "connected", role="publisher", broker=A),
    ]
    v = view(tmp_path, late)
    samples(tmp_path, {}, load={float(t): (24.0 if 8 <= t <= 10 else 3.0) for t in range(40)})
    assert apply(v, [connect_timeout(v)], ["connect_timeout"])[0][0].status == "fail"
    # starved over the whole span: 12 per core take at most 11/12 of the 20 s past the grace, never
    # all of it (the time the bound allows is not the overload's)
    samples(tmp_path, {}, load={float(t): 24.0 for t in range(40)})
    assert apply(v, [connect_timeout(v)], ["connect_timeout"])[0][0].status == "fail"


def test_a_late_notice_is_a_timer_the_queue_does_not_explain(tmp_path):
    # heartbeat_liveness in a fresh-clone default tier with other heavy work beside it (load 13.5
    # on 2 cores): noticed 4.1 s past the bound; a timer's wake-up is what the probe measures
    samples(tmp_path, {}, load={float(t): 24.0 for t in range(40)})
    assert judged(tmp_path, noticed(12.1), [paused_a()]).status == "fail"


def test_the_run_queue_is_recorded_and_summarized(tmp_path):
    rows = [
        {"ts": float(t), "probe_max_s": 0.01, "load1": 22.0 if t == 3 else 4.0, "cpus": 2} for t in range(5)
    ]
    summary = loadlog.summarize(rows, [0.01])
    assert summary["cpus"] == 2 and summary["load1_per_core_max"] == 11.0 and summary["starved_samples"] == 1
    assert loadlog.starved_s(rows[3]) == pytest.approx(1 - 1 / 11) and loadlog.starved_s(rows[0]) == 0.0


def agent_samples(tmp_path: Path, agent_cores: float) -> None:
    """Starved and stalled from 8 s on (12 runnable per core, 1.5 s probe stalls) while the agent's
    own processes kept `agent_cores` of the 2 cores busy."""
    samples(tmp_path, {float(t): 1.5 for t in range(8, 40)}, load={float(t): 24.0 for t in range(40)})
    rows = [{**row, "agents_cpu_s": agent_cores} for row in loadlog.read(tmp_path)]
    loadlog.write(tmp_path, rows)


def test_an_agent_that_spins_the_cpus_cannot_excuse_itself(tmp_path):
    from harness.verdict.checks import connect_timeout

    late = [
        r(14.0, "connected", role="subscriber:t/#", broker=A),
        r(14.5, "connected", role="publisher", broker=A),
    ]
    v = view(tmp_path, late)
    agent_samples(tmp_path, 0.05)  # the machine's overload, the agent nearly idle: inconclusive
    assert apply(v, [connect_timeout(v)], ["connect_timeout"])[0][0].status == "unknown"
    agent_samples(tmp_path, 2.0)  # the agent itself spins both cores: its own breach, a fail
    c = apply(v, [connect_timeout(v)], ["connect_timeout"])[0][0]
    assert c.status == "fail" and RERUN not in c.detail
    assert loadlog.agents_cores({"agents_cpu_s": 2.0}, 1.0) == 2.0 and loadlog.agents_cores({}, 1.0) == 0.0
