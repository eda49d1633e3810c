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
from harness.deploy.plan import Plan

__all__ = [
    "Backend",
    "BackendError",
    "SupportsFaultProxy",
    "SupportsIsolate",
    "SupportsMembers",
    "SupportsProxyMirror",
    "make_backend",
]


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
