"""Broker backends: the local-process backend (default), Docker (harness/backends/docker.py) and
Swarm (harness/backends/swarm.py: local brokers, fleet members as a swarm service)."""

from __future__ import annotations

from pathlib import Path

from harness.backends.base import (
    Backend,
    BackendError,
    SupportsFaultProxy,
    SupportsIsolate,
    SupportsMembers,
    SupportsProxyMirror,
)
from harness.deploy.plan import HOST, Plan

__all__ = [
    "Backend",
    "BackendError",
    "SupportsFaultProxy",
    "SupportsIsolate",
    "SupportsMembers",
    "SupportsProxyMirror",
    "client_host",
    "make_backend",
]


def client_host(kind: str) -> str:
    """Where the fault proxy's client links listen and what `mb.urls` names, for a run on `kind`:
    the manager's address the swarm's nodes reach (`BFH_SWARM_ADDR`) for `swarm`, else loopback."""
    if kind == "swarm":
        from harness.backends.swarm import advertise_addr

        return advertise_addr() or HOST
    return HOST


def make_backend(kind: str, plan: Plan, run_dir: str | Path) -> Backend:
    """The one way to get a backend by name (`local`, `docker`, `swarm`)."""
    if kind == "local":
        from harness.backends.local import LocalBackend

        return LocalBackend(plan, run_dir)
    if kind == "docker":
        from harness.backends.docker import DockerBackend

        return DockerBackend(plan, run_dir)
    if kind == "swarm":
        from harness.backends.swarm import SwarmBackend

        return SwarmBackend(plan, run_dir)
    raise BackendError(f"unknown backend {kind!r}; available: local, docker, swarm")
