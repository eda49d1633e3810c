"""Broker backends: the local-process backend (default) and Docker (harness/backends/docker.py)."""

from __future__ import annotations

from pathlib import Path

from harness.backends.base import (
    Backend,
    BackendError,
    SupportsFaultProxy,
    SupportsIsolate,
    SupportsProxyMirror,
)
from harness.deploy.plan import Plan

__all__ = [
    "Backend",
    "BackendError",
    "SupportsFaultProxy",
    "SupportsIsolate",
    "SupportsProxyMirror",
    "make_backend",
]


def make_backend(kind: str, plan: Plan, run_dir: str | Path) -> Backend:
    """The one way to get a backend by name (`local`, `docker`)."""
    if kind == "local":
        from harness.backends.local import LocalBackend

        return LocalBackend(plan, run_dir)
    if kind == "docker":
        from harness.backends.docker import DockerBackend

        return DockerBackend(plan, run_dir)
    raise BackendError(f"unknown backend {kind!r}; available: local, docker")
