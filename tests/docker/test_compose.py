"""A generated compose file run by the machine's own Compose (`docker compose` or `docker-compose`):
the pair comes up with one serving member, persistent messages cross the fault proxy, and after
the serving container is killed the other member takes over with no acknowledged message lost."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from harness.backends.compose import compose_command, compose_plan, n_client_ports, write
from harness.deploy.images import build, docker_client, faultproxy_recipe
from harness.deploy.plan import free_ports, release_ports
from harness.topology import builtin_topology
from tests.backend.support import Consumer, Producer

pytestmark = [pytest.mark.docker, pytest.mark.broker, pytest.mark.extended, pytest.mark.timeout(1800)]

PROJECT_LABEL = "com.docker.compose.project"


def _containers(project: str) -> list[Any]:
    return docker_client().containers.list(all=True, filters={"label": f"{PROJECT_LABEL}={project}"})


def _health(project: str) -> dict[str, str]:
    out = {}
    for c in _containers(project):
        c.reload()
        service = c.labels.get("com.docker.compose.service", c.name)
        out[service] = c.attrs["State"].get("Health", {}).get("Status", c.status)
    return out


def _wait(cond: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(1)
    raise AssertionError(f"{what} within {timeout:.0f}s")


def test_generated_pair_runs_under_compose_and_fails_over(tmp_path: Path, activemq_image: str) -> None:
    cmd = compose_command()
    if cmd is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    proxy_image, _built, _secs = build(faultproxy_recipe())
    topo = builtin_topology("pair")
    ports = free_ports(n_client_ports(topo) + 1)  # reserved machine-wide: no clash with other tests
    write(topo, tmp_path, ports[:-1], ports[-1])
    plan = compose_plan(topo, ports[:-1])
    urls = plan.client_urls("stomp")
    project = f"bfhcompose{os.getpid()}{time.monotonic_ns() % 100000}"
    base = [*cmd, "-p", project, "-f", str(tmp_path / "pair.yml")]
    env = {**os.environ, "ACTIVEMQ_IMAGE": activemq_image, "TOXIPROXY_IMAGE": proxy_image}

    def compose(*args: str) -> None:
        subprocess.run([*base, *args], env=env, check=True, capture_output=True, timeout=180)

    consumer = producer = None
    try:
        compose("up", "-d")
        # the store lock on the shared volume: exactly one member serves (healthy), the other waits
        first = _wait(
            lambda: [s for s, h in _health(project).items() if s.startswith("pair-") and h == "healthy"],
            90,
            "a healthy member",
        )
        time.sleep(4)  # a second healthy member would show by now
        health = _health(project)
        assert sorted(health[s] for s in ("pair-1", "pair-2")) == ["healthy", "starting"], health
        consumer = Consumer(urls, "/queue/compose", name="compose-consumer").start(timeout=60)
        producer = Producer(urls, "/queue/compose", name="compose-producer")
        ids = [f"m{i}" for i in range(40)]
        for m in ids[:20]:
            producer.send(m)
        compose("kill", first[0])  # SIGKILL of the serving container
        for m in ids[20:]:
            producer.send(m, timeout=90)
        missing = consumer.wait_for(set(ids), 60)
        assert not missing, f"lost across the failover: {sorted(missing)}"
        other = "pair-2" if first[0] == "pair-1" else "pair-1"
        _wait(lambda: _health(project)[other] == "healthy", 30, f"{other} healthy after the takeover")
        assert producer.connected_to is not None and consumer.connected_to is not None
    finally:
        for peer in (producer, consumer):
            if peer is not None:
                peer.stop() if isinstance(peer, Consumer) else peer.close()
        subprocess.run([*base, "down", "-v", "-t", "5"], env=env, capture_output=True, timeout=180)
        release_ports(ports)
    assert _containers(project) == []
    assert not docker_client().volumes.list(filters={"label": f"{PROJECT_LABEL}={project}"})
