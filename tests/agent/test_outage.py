"""No broker reachable: subscribers retry forever at a bounded rate; the publisher drops exactly
the messages whose outage outlasted mb.publisher.timeout, at first attempt + timeout.

A control runs the `publisher_timeout_x1000` defect agent through the same outage: it drops nothing.
"""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

from harness.agents.launch import AgentProcess
from harness.run.env import Environment
from tests.agent.support import (
    REFERENCE,
    defect,
    events,
    got_all,
    start_agent,
    stop_ok,
    subscribed_all,
    unique,
    wait_or_fail,
)

pytestmark = [pytest.mark.broker, pytest.mark.masterslave, pytest.mark.timeout(240)]

TIMEOUT_S = 3
RATE = 10.0
OUTAGE_S = 7.0
BACKOFF_CAP_S = 1.0


def _outage(env: Environment, protocol: str, command: str, count: int) -> tuple[AgentProcess, float, float]:
    root = unique("out")
    ag = start_agent(
        env,
        protocol=protocol,
        command=command,
        subscriptions=[f"{root}/#", f"{root}/+/y"],
        publications=[(f"{root}/x/y", count, RATE)],
        conf={"mb.publisher.timeout": str(TIMEOUT_S), "mb.backoff.cap": str(BACKOFF_CAP_S)},
    )
    wait_or_fail(ag, subscribed_all, 20, "subscriptions confirmed")
    wait_or_fail(ag, lambda a: len(events(a, "sent")) >= 15, 15, "publishing")
    t_down = time.time()
    fault = env.faults.start("down", "pair")  # every link of both members: nothing reachable
    time.sleep(OUTAGE_S)
    t_up = time.time()  # the outage ends when the heal begins: a link may be back before heal() returns
    env.faults.stop(fault)
    wait_or_fail(
        ag, lambda a: len(events(a, "sent")) + len(events(a, "dropped")) >= count, 60, "publications done"
    )
    wait_or_fail(ag, got_all, 20, "every acknowledged message delivered")
    stop_ok(ag)
    return ag, t_down, t_up


@pytest.mark.parametrize("protocol", ["mqtt", "stomp"])
def test_retry_forever_and_exact_drop_accounting(healthy_pair: Environment, protocol: str) -> None:
    count = 150
    ag, t_down, t_up = _outage(healthy_pair, protocol, REFERENCE, count)

    # -- subscribers kept retrying, at a bounded rate, through the whole outage ------------------
    n_urls = len(healthy_pair.mb_urls(protocol))
    for sub in ag.spec.workload["subscriptions"]:
        role = f"subscriber:{sub['topic']}"
        tries = sorted(
            r["ts"]
            for r in events(ag, "disconnected", role=role)
            if r["reason"].startswith("connect_failed") and t_down <= r["ts"] <= t_up
        )
        assert tries, f"{role} made no attempt during the outage"
        assert tries[0] - t_down < 2.0 and t_up - tries[-1] < 2.5, f"{role} stopped retrying"
        gaps = [b - a for a, b in zip([t_down, *tries], [*tries, t_up], strict=True)]
        assert max(gaps) < BACKOFF_CAP_S + 1.5, f"{role}: a {max(gaps):.1f}s pause in retrying"
        rate = len(tries) / (t_up - t_down)
        # at most one pass over the list per backoff delay (>= cap/2 once capped), plus the ramp-up
        assert rate <= n_urls / (BACKOFF_CAP_S / 2) + 2, f"{role}: {rate:.1f} attempts/s is a busy loop"
        back = [r for r in events(ag, "subscribed", topic=sub["topic"]) if r["ts"] > t_up]
        assert back and back[0]["ts"] - t_up < BACKOFF_CAP_S + 4.0, f"{role} slow to come back"

    # -- publisher: one outcome per message, drops exactly where the timeout was outlasted -------
    first: dict[str, float] = {}
    for r in events(ag, "send_attempt"):
        first.setdefault(r["msg_id"], r["ts"])
    outcome: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for ev in ("sent", "dropped"):
        for r in events(ag, ev):
            outcome[r["msg_id"]].append((ev, r["ts"]))
    assert len(first) == count and set(outcome) == set(first)
    assert all(len(v) == 1 for v in outcome.values()), "a message was both sent and dropped, or twice"
    pub_back = min(r["ts"] for r in events(ag, "connected", role="publisher") if r["ts"] > t_down)
    dropped = {m for m, v in outcome.items() if v[0][0] == "dropped"}
    assert dropped, "an outage longer than the timeout must drop messages"
    for m, ((ev, ts),) in outcome.items():
        age = ts - first[m]
        if ev == "dropped":
            assert TIMEOUT_S - 0.05 <= age <= TIMEOUT_S + 0.6, (
                f"{m} dropped {age:.2f}s after its first attempt"
            )
        else:
            assert age <= TIMEOUT_S + 0.6, f"{m} acknowledged {age:.2f}s after its first attempt"
        if t_down + 0.2 <= first[m] and first[m] + TIMEOUT_S <= pub_back - 0.3:
            assert ev == "dropped", f"{m}: its outage outlasted the timeout, yet it was {ev}"
        if first[m] + TIMEOUT_S >= pub_back + 0.3 or first[m] < t_down - 1.0:
            assert ev == "sent", f"{m}: the broker was back before its timeout, yet it was dropped"
    reasons = {r["reason"] for r in events(ag, "dropped")}
    assert reasons == {"publisher_timeout"}
    expected = (pub_back - t_down - TIMEOUT_S) * RATE
    assert abs(len(dropped) - expected) <= 0.3 * expected + 5, (len(dropped), expected)


def test_control_timeout_x1000_defect_is_caught(healthy_pair: Environment) -> None:
    ag, _t_down, _t_up = _outage(healthy_pair, "mqtt", defect("publisher_timeout_x1000"), 120)
    assert not events(ag, "dropped"), "the defect never drops"
    first: dict[str, float] = {}
    for r in events(ag, "send_attempt"):
        first.setdefault(r["msg_id"], r["ts"])
    late = [r for r in events(ag, "sent") if r["ts"] - first[r["msg_id"]] > TIMEOUT_S + 0.6]
    assert late, "messages piled up during the outage and went out after their timeout"
