"""kill -9 of the master under load: no loss, every role on the slave, quickly (both protocols).

Also runs the second adapter (stomp.py host-list failover) and the Java OpenWire agent (ActiveMQ's
failover transport, built by make setup) through the same check.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness.run.env import Environment
from tests.agent.support import (
    HOSTLIST,
    REFERENCE,
    events,
    got_all,
    received_by_sub,
    roles,
    sent_ids,
    start_agent,
    stop_ok,
    subscribed_all,
    unique,
    wait_or_fail,
)

pytestmark = [pytest.mark.broker, pytest.mark.masterslave, pytest.mark.timeout(180)]

# generous: the target is <= 1 s from the slave opening its ports (benchmark). A loaded CI machine
# saw 3.07 s: backoff at its 1 s cap, then the new master's first handshakes on a cold JVM.
RECOVERY_BOUND_S = 5.0
JAVA_JAR = Path(__file__).resolve().parents[2] / "build" / "java" / "bfh-openwire-agent.jar"
JAVA = f"java -jar {JAVA_JAR} --config {{config}} --workload {{workload}} --log {{log}}"
needs_java_agent = pytest.mark.skipif(
    not JAVA_JAR.exists(), reason="Java agent not built (make setup; needs openjdk-17-jdk-headless)"
)


@pytest.mark.parametrize(
    ("protocol", "command"),
    [
        ("mqtt", REFERENCE),
        ("stomp", REFERENCE),
        ("stomp", HOSTLIST),
        pytest.param("openwire", JAVA, marks=needs_java_agent),
    ],
    ids=["mqtt-reference", "stomp-reference", "stomp-hostlist", "openwire-java"],
)
def test_kill_master_no_loss_and_prompt_failover(
    healthy_pair: Environment, protocol: str, command: str
) -> None:
    env = healthy_pair
    root = unique("fo")
    count = 120
    ag = start_agent(
        env,
        protocol=protocol,
        subscriptions=[f"{root}/a/#", f"{root}/+/x"],
        publications=[(f"{root}/a/x", count, 20.0)],
        command=command,
    )
    wait_or_fail(ag, subscribed_all, 20, "all subscriptions confirmed")
    wait_or_fail(ag, lambda a: len(sent_ids(a)) >= 30, 20, "30 messages acknowledged")

    old = env.backend.master("pair")
    assert old is not None
    t_kill = time.time()
    takeover = env.faults.kill(old)
    assert takeover is not None
    t_open = t_kill + takeover  # the new master's ports were seen open at about this time
    new = env.backend.master("pair")
    assert new is not None and new != old
    new_url = env.plan.client_link(new, protocol).listen

    wait_or_fail(
        ag, lambda a: len(events(a, "sent")) + len(events(a, "dropped")) >= count, 60, "all publications"
    )
    wait_or_fail(ag, got_all, 20, "every acknowledged message delivered to every subscription")
    stop_ok(ag)

    assert not events(ag, "dropped"), "nothing may be dropped: the outage is far shorter than the timeout"
    assert len(sent_ids(ag)) == count
    by_sub = received_by_sub(ag)
    for sub in (f"{root}/a/#", f"{root}/+/x"):
        missing = sent_ids(ag) - set(by_sub[sub])
        assert not missing, f"{sub} lost {len(missing)} acknowledged messages, e.g. {sorted(missing)[:5]}"

    # every role failed over to the new master, and did so promptly
    for role in roles(ag):
        back = [r for r in events(ag, "connected", role=role) if r["ts"] > t_kill]
        assert back, f"{role} never reconnected after the kill"
        assert back[0]["broker"] == new_url, f"{role} reconnected to {back[0]['broker']}, not the new master"
        assert back[0]["ts"] - t_open < RECOVERY_BOUND_S, (
            f"{role} reconnected {back[0]['ts'] - t_open:.2f}s after the slave opened its ports"
        )
    first_sent = min(r["ts"] for r in events(ag, "sent") if r["ts"] > t_kill)
    first_recv = min(r["ts"] for r in events(ag, "received") if r["ts"] > t_kill and r["broker"] == new_url)
    assert max(first_sent, first_recv) - t_open < RECOVERY_BOUND_S
