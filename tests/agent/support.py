"""Helpers for the agent tests: launch an agent on a running environment and read its log."""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from typing import Any

from harness.agents.launch import AgentProcess, AgentSpec, launch_agent
from harness.run.env import Environment

REFERENCE = "{python} -m agent_under_test.reference --config {config} --workload {workload} --log {log}"
HOSTLIST = "{python} -m agent_under_test.stomp_hostlist --config {config} --workload {workload} --log {log}"
_names = itertools.count(1)


def defect(name: str) -> str:
    from agent_under_test.defects import command

    return command(name)


def unique(prefix: str) -> str:
    """A fresh name: agents (and so client ids, durable subscriptions) and topics never collide."""
    return f"{prefix}{next(_names)}{int(time.time() * 1000) % 100000}"


def start_agent(
    env: Environment,
    *,
    protocol: str = "mqtt",
    subscriptions: list[str] | None = None,
    publications: list[tuple[str, int, float]] | None = None,
    urls: list[str] | None = None,
    conf: dict[str, str] | None = None,
    command: str = REFERENCE,
    name: str | None = None,
    qos: int = 1,
    payload_bytes: int = 128,
) -> AgentProcess:
    body = {
        "protocol": protocol,
        "subscriptions": [{"topic": t, "qos": qos, "durable": True} for t in subscriptions or []],
        "publications": [
            {"topic": t, "qos": qos, "count": n, "rate_per_s": r, "payload_bytes": payload_bytes}
            for t, n, r in publications or []
        ],
    }
    full = {
        "mb.urls": ",".join(urls if urls is not None else env.mb_urls(protocol)),
        "mb.username": "",
        "mb.password": "",
        "mb.publisher.timeout": "60",
        **(conf or {}),
    }
    spec = AgentSpec(name or unique("ag"), full, body, command)
    return launch_agent(spec, env.run_dir, env.run_id)


def events(ag: AgentProcess, event: str, **match: Any) -> list[dict[str, Any]]:
    ag.poll()
    return [r for r in ag.records if r.get("event") == event and all(r.get(k) == v for k, v in match.items())]


def subscribed_all(ag: AgentProcess) -> bool:
    want = {s["topic"] for s in ag.spec.workload["subscriptions"]}
    return want <= {r["topic"] for r in events(ag, "subscribed")}


def wait_or_fail(ag: AgentProcess, predicate: Any, timeout: float, what: str) -> None:
    if not ag.wait_for(predicate, timeout):
        ag.poll()
        tail = [r for r in ag.records if r["event"] not in ("received", "send_attempt", "sent")][-15:]
        raise AssertionError(
            f"{what} not within {timeout:g}s; alive={ag.alive()}\nlast records: {tail}\n"
            f"agent output: {ag.stderr_tail()}"
        )


def received_by_sub(ag: AgentProcess) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in events(ag, "received"):
        out[r["subscription"]][r["msg_id"]] += 1
    return out


def sent_ids(ag: AgentProcess) -> set[str]:
    return {r["msg_id"] for r in events(ag, "sent")}


def got_all(ag: AgentProcess) -> bool:
    """Every sent message reached every subscription it matches (here: all of them)."""
    sent = sent_ids(ag)
    by_sub = received_by_sub(ag)
    return all(sent <= set(by_sub.get(s["topic"], {})) for s in ag.spec.workload["subscriptions"])


def roles(ag: AgentProcess) -> set[str]:
    out = {f"subscriber:{s['topic']}" for s in ag.spec.workload["subscriptions"]}
    if ag.spec.workload["publications"]:
        out.add("publisher")
    return out


def lost_connections(ag: AgentProcess) -> list[dict[str, Any]]:
    """`disconnected` records of established connections (not failed attempts, not shutdown)."""
    return [
        r
        for r in events(ag, "disconnected")
        if not r["reason"].startswith("connect_failed")
        and r["reason"] not in ("shutdown", "publications_complete")
        and not r["reason"].startswith("subscribe_failed")
    ]


def stop_ok(ag: AgentProcess) -> None:
    t0 = time.monotonic()
    rc = ag.stop(timeout=10)
    took = time.monotonic() - t0
    assert rc == 0, f"agent exit status {rc} after SIGTERM ({took:.1f}s); output: {ag.stderr_tail()}"
    assert took < 10, f"agent took {took:.1f}s to exit after SIGTERM"
