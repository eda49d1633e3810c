"""Security: brokers with users (simpleAuthenticationPlugin) and TLS connectors from a per-run CA."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness.agents import AgentSpec, agent_factory, launch_agent, workload
from harness.env import Environment, new_run_dir
from harness.schedule import Schedule, Step
from harness.topology import builtin_topology
from scenarios.support import agent_records, assert_no_loss

pytestmark = [pytest.mark.security, pytest.mark.broker]
SECURE = builtin_topology("secure-pair")
USER = next(u for u in SECURE.users if not getattr(u, "bridge", False))
SECRETS = [u.password for u in SECURE.users]
REJECTED_WINDOW_S = 8.0


def _rejections(run_dir: Path) -> int:
    """Connections the brokers refused for bad credentials (counted broker-side: any agent works)."""
    n = 0
    for log in run_dir.glob("brokers/*/broker.log"):
        lines = log.read_text(errors="replace").splitlines()
        n += sum(1 for x in lines if "Failed to add Connection" in x and "password is invalid" in x)
    return n


def test_wrong_credentials_bounded_retry_rate(reports_root, backend_kind, agent_cmd):
    """Promise: with a wrong mb.password the agent neither crashes nor spins: it keeps retrying at a
    bounded rate (a few attempts per second per connection, counted at the brokers), says why in its
    log, and exits cleanly on SIGTERM."""
    run_id, run_dir = new_run_dir(reports_root, "wrong-credentials")
    with Environment.up(SECURE, run_dir, run_id, backend=backend_kind) as env:
        conf = {
            "mb.urls": ",".join(env.mb_urls("mqtt", "pair")),
            "mb.username": USER.name,
            "mb.password": "not-the-password",
            "mb.publisher.timeout": "900",
            "mb.ssl.ca": str(env.plan.ca_file),
        }
        spec = AgentSpec("agent-1", conf, workload("mqtt", ["instance/#", "topology/#"], []))
        if agent_cmd:
            spec.command = agent_cmd
        agent = launch_agent(spec, run_dir, run_id)
        time.sleep(REJECTED_WINDOW_S)
        assert agent.alive(), f"the agent died on rejected credentials: {agent.stderr_tail()}"
        code = agent.stop()
    assert code == 0, f"agent exit {code} on SIGTERM; run folder {run_dir}"
    rejected = _rejections(run_dir)
    connections = 3  # two subscriptions and the publisher
    rate = rejected / REJECTED_WINDOW_S
    assert rejected > 0, f"no rejected connection seen at the brokers: the agent stopped retrying; {run_dir}"
    assert rate <= connections * 4, f"{rate:.1f} rejected connects/s: a retry loop without backoff; {run_dir}"
    assert not agent_records(run_dir, "subscribed"), "subscribed with a wrong password"


@pytest.mark.spark
def test_tls_and_auth_pair_kill_master_no_loss_and_no_secret_leaks(run_scenario):
    """Promise: over TLS (verified with the run's CA) and with credentials, a master kill loses
    nothing; and no password appears in any log, report, run.json or analysis output."""

    def agents(env):
        return agent_factory(
            group="pair",
            username=USER.name,
            password=USER.password,
            extra_conf={"mb.ssl.ca": str(env.plan.ca_file)},
            command=run_scenario.agent_cmd,
        )(env)

    sched = Schedule(seed=5, steps=[Step(at=5, fault="kill", target="master:pair")], settle_s=8)
    r = run_scenario(SECURE, sched, "tls-auth-kill", agents=agents)
    assert_no_loss(r, "master kill over TLS with credentials")
    leaks = []
    for f in r.run_dir.rglob("*"):
        # The brokers' own config must hold the users' passwords; the agent's config holds its own.
        if (
            not f.is_file()
            or "conf" in f.relative_to(r.run_dir).parts[:3]
            or f.name in ("agent.conf", "password")
        ):
            continue
        if f.suffix in (".p12", ".pem", ".parquet", ".crc") or "kahadb" in f.parts:
            continue
        text = f.read_text(errors="replace")
        leaks += [f"{f.relative_to(r.run_dir)}" for s in SECRETS if s in text]
    assert not leaks, f"secrets written to: {sorted(set(leaks))}; run folder {r.run_dir}"
