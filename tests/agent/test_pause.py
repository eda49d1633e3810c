"""A paused master (SIGSTOP: it keeps the store lock, so the slave cannot take over) thaws after the
agent's keepalive expired.

A CONNECT sent to the frozen broker is replayed when it thaws, and ActiveMQ steals the link for
every replay of the same client id, restoring and dropping the client's durable subscriptions each
time: once in the soak this left a live subscription with no consumer (109 messages lost). The
reference agent probes with a throwaway clean-session id and waits for the thawed broker to close
what it still held, so no subscriber's link is stolen, and both subscriptions get every message.
"""

from __future__ import annotations

import re
import time

import pytest

from harness.run.env import Environment
from tests.agent.support import (
    events,
    got_all,
    lost_connections,
    start_agent,
    stop_ok,
    subscribed_all,
    unique,
    wait_or_fail,
)

pytestmark = [pytest.mark.broker, pytest.mark.masterslave, pytest.mark.timeout(240)]

PAUSE_S = 10.0
COUNT = 150


def test_paused_master_steals_no_subscriber_link(healthy_pair: Environment) -> None:
    env = healthy_pair
    master = env.backend.master("pair")
    assert master is not None
    root = unique("pause")
    ag = start_agent(
        env, subscriptions=[f"{root}/#", f"{root}/+/y"], publications=[(f"{root}/x/y", COUNT, 10.0)]
    )
    wait_or_fail(ag, subscribed_all, 20, "subscriptions confirmed")
    wait_or_fail(ag, lambda a: len(events(a, "sent")) >= 15, 15, "publishing")
    log = env.backend.broker_log(master)
    seen = len(log.read_text(errors="replace"))
    t_pause = time.time()
    fault = env.faults.start("pause", master)
    time.sleep(PAUSE_S)
    env.faults.stop(fault)
    wait_or_fail(ag, lambda a: len(events(a, "sent")) >= COUNT, 60, "publications done")
    wait_or_fail(ag, got_all, 20, "every acknowledged message delivered at both subscriptions")
    stop_ok(ag)

    # The pause must have cost the subscribers their connections, or nothing was tested.
    lost = [r for r in lost_connections(ag) if r["ts"] > t_pause and r["role"].startswith("subscriber")]
    assert len({r["role"] for r in lost}) == 2, f"the pause did not break both subscriptions: {lost}"
    thawed = log.read_text(errors="replace")[seen:]
    stolen = re.findall(rf"Stealing link for clientId (\S*{re.escape(ag.spec.name)}-s\d+)", thawed)
    assert not stolen, f"the thawed broker stole subscriber links: {stolen}"
