"""The promises of docs/agent-semantics.md, one checker each (Jepsen's composed-checker shape).

A checker takes the reconciled run (`RunView`) and returns a `Check`: the promise, its status
(`pass`, `fail`, or `n/a` when the run gives it nothing to judge), how many violations, evidence
(examples with msg_id / time / broker / role) and the fault window they fall in. Checkers never
raise on odd data: a record they cannot read is skipped (the reconciliation counts it as malformed).
`PROMISES` is the registry the judge, the catalog's gates and docs/verdict.md read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.verdict.checks.applicable import applicable
from harness.verdict.checks.base import BOUNDS, Check
from harness.verdict.checks.connections import (
    bounded_retry,
    connect_timeout,
    first_available,
    independent_connections,
    liveness,
    recovery,
    subscription_confirmed,
)
from harness.verdict.checks.counts import at_least_once, integrity, no_downgrade, non_vacuous, policy
from harness.verdict.checks.environment import bridge_health, clean_exit, faults_applied, no_secret_leak
from harness.verdict.checks.fleet import fairness, fleet_recovery, no_agent_left_behind, reconnect_storm
from harness.verdict.checks.paths import paths
from harness.verdict.checks.publishing import no_resend_after_ack, publish_latency, publisher_timeout
from harness.verdict.checks.witness import broker_consumers, consumer_confirmed
from harness.verdict.view import RunView

__all__ = [
    "BOUNDS",
    "PROMISES",
    "Check",
    "Promise",
    "bounded_retry",
    "connect_timeout",
    "first_available",
    "independent_connections",
    "liveness",
    "non_vacuous",
    "publish_latency",
    "publisher_timeout",
    "recovery",
    "subscription_confirmed",
]


@dataclass(frozen=True)
class Promise:
    name: str
    what: str
    check: Callable[[RunView], Check]


PROMISES: dict[str, Promise] = {
    p.name: p
    for p in (
        Promise(
            "applicable", "the agent takes what the run gives it (else every promise is n/a)", applicable
        ),
        Promise("at_least_once", "no acknowledged at-least-once delivery is lost", at_least_once),
        Promise(
            "integrity", "nothing received that was never sent, dropped, or not subscribed to", integrity
        ),
        Promise("no_downgrade", "the QoS and durability the workload asks for are used", no_downgrade),
        Promise(
            "publisher_timeout", "retry a publish until mb.publisher.timeout, then drop it", publisher_timeout
        ),
        Promise("liveness", "a dead or black-holed broker is noticed within the liveness bound", liveness),
        Promise("first_available", "connect to the first available broker in mb.urls order", first_available),
        Promise(
            "connect_timeout",
            "every connection attempt is bounded (a black hole is no trap)",
            connect_timeout,
        ),
        Promise("bounded_retry", "failed attempts (rejected credentials included) back off", bounded_retry),
        Promise("recovery", "back after every heal; publishing never stalls", recovery),
        Promise(
            "subscription_confirmed", "subscribed only once the broker confirmed", subscription_confirmed
        ),
        Promise(
            "consumer_confirmed",
            "the broker had the consumer a `subscribed` claims (the broker's view)",
            consumer_confirmed,
        ),
        Promise(
            "broker_consumers",
            "a subscription the broker granted has a consumer on it (a broker finding)",
            broker_consumers,
        ),
        Promise("no_resend_after_ack", "an acknowledged message is never sent again", no_resend_after_ack),
        Promise(
            "independent_connections", "each subscription fails over on its own", independent_connections
        ),
        Promise("publish_latency", "a serving broker acknowledges publishes promptly", publish_latency),
        Promise("bridge_health", "network bridges do not keep failing", bridge_health),
        Promise("paths", "every delivery path the topology requires delivers (and no forbidden one)", paths),
        Promise(
            "fleet_recovery", "every fleet agent's every role back within the bound (a fleet)", fleet_recovery
        ),
        Promise(
            "no_agent_left_behind",
            "every fleet agent subscribed and receiving after the last fault",
            no_agent_left_behind,
        ),
        Promise(
            "reconnect_storm",
            "a fleet's reconnect attempts at the brokers and its time until all are back, bounded",
            reconnect_storm,
        ),
        Promise("fairness", "no fleet agent's deliveries starved", fairness),
        Promise("clean_exit", "agents neither crash nor hang, and exit 0 on SIGTERM", clean_exit),
        Promise("no_secret_leak", "no password written to run output", no_secret_leak),
        Promise("non_vacuous", "the run and each fault window carried traffic", non_vacuous),
        Promise("faults_applied", "every fault step took effect (a harness promise)", faults_applied),
        Promise(
            "policy", "duplicates/malformed records within the verdict policy's limits (limits.py)", policy
        ),
    )
}
