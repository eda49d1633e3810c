"""Docker backend tests: skipped with the reason when no Docker daemon answers or an image
cannot be built. The ActiveMQ and fault proxy images are built once per session (cached by recipe
hash): the backend runs both through testcontainers and never pulls."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def activemq_image() -> str:
    from harness.deploy import images

    try:
        images.docker_client()
    except images.ImageError as e:
        pytest.skip(f"docker backend: {e}")
    try:
        tag, _built, _secs = images.build(images.activemq_recipe())
        images.build(images.faultproxy_recipe())
    except images.ImageError as e:
        pytest.skip(f"docker backend: an image cannot be built: {str(e)[:500]}")
    return tag


@pytest.fixture
def backend_kind(activemq_image: str) -> str:
    """Scenarios under tests/docker always run on the docker backend (image built first)."""
    return "docker"
