"""The measures the checkers keep for the scorecard (Check.measures, docs/compare.md): on
hand-written runs, each is the figure the history says (pure logic, no broker)."""

from __future__ import annotations

from harness.verdict.checks import bounded_retry, publish_latency, publisher_timeout, recovery
from harness.verdict.view import Window
from tests.verdict.test_checks import HEALTHY, A, B, r, view


def test_recovery_per_role_and_takeover_to_delivery() -> None:
    kill = Window("f1", "kill", "pair-1", 2.0, 4.0, {"group": "pair", "new_master": "pair-2"})
    history = [
        *HEALTHY,
        r(2.1, "disconnected", role="subscriber:t/#", broker=A, reason="liveness"),
        r(2.2, "disconnected", role="publisher", broker=A, reason="liveness"),
        r(5.1, "connected", role="subscriber:t/#", broker=B),
        r(5.6, "subscribed", topic="t/#", broker=B),
        r(6.2, "connected", role="publisher", broker=B),
        r(7.0, "send_attempt", msg_id="m2", broker=B),
        r(7.1, "sent", msg_id="m2"),
        r(7.5, "received", msg_id="m2"),
        r(60.0, "send_attempt", msg_id="m3", broker=B),
    ]
    c = recovery(view(history, [kill]))
    assert c.ok
    assert c.measures == {
        "recovery_s[subscriber:t/#]": [3.5],  # lost at 2.1, subscribed again at 5.6
        "recovery_s[publisher]": [4.0],  # lost at 2.2, connected at 6.2
        "retry_pause_max_s[subscriber:t/#]": [3.0],  # no attempt between: lost 2.1 -> connected 5.1
        "retry_pause_max_s[publisher]": [4.0],
        "takeover_to_delivery_s": [5.5],  # the kill at 2.0, the next delivery at 7.5
    }
    assert c.to_dict()["measures"] == c.measures
    late = recovery(view(history[:-1], [kill]))  # the run ends before the bound: measured, not judged
    assert late.ok and late.measures == c.measures
    assert recovery(view(HEALTHY)).measures == {}  # no fault: nothing measured


def _failed(ts: float, role: str, broker: str = A) -> dict:
    return r(ts, "disconnected", role=role, broker=broker, reason="connect_failed: refused: [Errno 111]")


def test_the_longest_retry_pause_while_away_is_what_the_backoff_reached() -> None:
    """Each pass over mb.urls fails at both brokers within a millisecond, then the agent sleeps:
    the longest gap from the loss through its attempts to the connection is its longest sleep,
    whenever the slave takes over; attempts before the loss or after it is back do not count."""
    kill = Window("f1", "kill", "pair-1", 2.0, 4.0, {"group": "pair", "new_master": "pair-2"})
    sub, pub = "subscriber:t/#", "publisher"
    reference = [2.2, 2.4, 2.8, 3.6]  # the reference's pauses: 0.1, 0.2, 0.4, 0.8, then 0.9 (cap 1 s)
    slow = [2.5, 3.1, 4.3]  # 3x slower: 0.3, 0.6, 1.2, then 1.7 (cap 3 s)
    history = sorted(
        [
            _failed(0.1, sub),  # at the launch, before the first connection: not this window's
            *HEALTHY,
            r(2.1, "disconnected", role=sub, broker=A, reason="connection_lost: reset"),
            r(2.2, "disconnected", role=pub, broker=A, reason="connection_lost: reset"),
            *(f for t in reference for f in (_failed(t, sub), _failed(t + 0.001, sub, B))),
            *(f for t in slow for f in (_failed(t, pub), _failed(t + 0.001, pub, B))),
            r(4.5, "connected", role=sub, broker=B),
            r(4.6, "subscribed", topic="t/#", broker=B),
            r(6.0, "connected", role=pub, broker=B),
            r(9.0, "send_attempt", msg_id="m2", broker=B),
            r(9.5, "received", msg_id="m2"),
            _failed(20.0, sub),  # after it was back: not this window's either
            r(60.0, "send_attempt", msg_id="m3", broker=B),
        ],
        key=lambda x: x["ts"],
    )
    c = recovery(view(history, [kill]))
    assert c.ok
    assert c.measures["retry_pause_max_s[subscriber:t/#]"] == [0.899]  # 3.601 -> 4.5
    assert c.measures["retry_pause_max_s[publisher]"] == [1.699]  # 4.301 -> 6.0
    assert c.measures["recovery_s[subscriber:t/#]"] == [2.5]  # lost 2.1, subscribed 4.6
    late = recovery(view(history[:-1], [kill]))  # past the agent's stop: measured all the same
    assert late.measures == c.measures


def test_failed_attempts_per_second() -> None:
    calm = [
        r(1 + i * 0.5, "disconnected", role="publisher", broker=A, reason="connect_failed: refused")
        for i in range(20)
    ]
    assert bounded_retry(view(calm)).measures == {"failed_attempts_per_s[publisher]": [2.2]}  # 11 in 5 s
    spin = [
        r(1 + i * 0.01, "disconnected", role="publisher", broker=A, reason="connect_failed: refused")
        for i in range(100)
    ]
    c = bounded_retry(view(spin))
    assert c.status == "fail" and c.measures == {"failed_attempts_per_s[publisher]": [20.0]}


def test_publish_latency_percentiles_and_drops_at_the_timeout() -> None:
    acked = [r(2.0 + i, "send_attempt", msg_id=f"p{i}", broker=A) for i in range(20)]
    acked += [r(2.0 + i + 0.01 * (i + 1), "sent", msg_id=f"p{i}") for i in range(20)]
    c = publish_latency(view(sorted([*HEALTHY, *acked], key=lambda x: x["ts"])))
    assert c.measures == {"publish_latency_p50_s": [0.1], "publish_latency_p95_s": [0.19]}
    dropped = [
        *HEALTHY,
        r(2.0, "send_attempt", msg_id="m2"),
        r(6.1, "dropped", msg_id="m2", reason="publisher_timeout"),
        r(7.0, "send_attempt", msg_id="m3"),
        r(7.5, "dropped", msg_id="m3", reason="shutdown"),
    ]
    assert publisher_timeout(view(dropped)).measures == {"dropped_at_timeout": [1]}
