"""Secrets at rest: in a secure run (users + TLS), every file that holds a secret is owner-only.

A file holds a secret when it contains a user's password or the run's keystore password, or is a
private key (a broker's keystore). Found by content, so a new file that starts holding a password
is checked without this test knowing its name.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from harness.run.env import Environment, new_run_dir
from harness.topology import builtin_topology
from tests.agent.support import start_agent, stop_ok, subscribed_all, unique, wait_or_fail

pytestmark = [pytest.mark.broker, pytest.mark.security, pytest.mark.timeout(300)]


def secret_holders(run_dir: Path, secrets: list[str]) -> list[Path]:
    needles = [s.encode() for s in secrets if s]
    out = []
    for f in sorted(run_dir.rglob("*")):
        if f.is_symlink() or not f.is_file() or "kahadb" in f.parts:
            continue
        data = f.read_bytes()
        private_key = f.parent.name == "tls" and f.suffix == ".p12" and f.stem != "truststore"
        if private_key or any(n in data for n in needles):
            out.append(f)
    return out


def test_files_holding_secrets_are_owner_only(reports_root: Path, backend_kind: str) -> None:
    topo = builtin_topology("secure-pair")
    agent_user = next(u for u in topo.users if not u.bridge)
    run_id, run_dir = new_run_dir(reports_root, "secrets-at-rest")
    with Environment.up(topo, run_dir, run_id, backend=backend_kind) as env:
        ag = start_agent(
            env,
            protocol="stomp",
            subscriptions=[f"{unique('rest')}/#"],
            conf={
                "mb.username": agent_user.name,
                "mb.password": agent_user.password,
                "mb.ssl.ca": str(env.plan.ca_file),
            },
        )
        wait_or_fail(ag, subscribed_all, 30, "subscribed with credentials over TLS")
        stop_ok(ag)
        tls_password = (env.plan.tls_dir / "password").read_text()
    secrets = [u.password for u in topo.users] + [tls_password]
    holders = secret_holders(run_dir, secrets)
    names = {f.name for f in holders}
    # not vacuous: the agent's config and the brokers' configs are among them
    assert "agent.conf" in names and "activemq.xml" in names, f"secret holders found: {sorted(names)}"
    loose = [
        f"{f.relative_to(run_dir)} {stat.filemode(f.stat().st_mode)}"
        for f in holders
        if f.stat().st_mode & 0o077
    ]
    assert not loose, f"files holding a secret readable by others: {loose}; run folder {run_dir}"
