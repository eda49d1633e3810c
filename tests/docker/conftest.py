"""Docker backend tests: skipped with the reason when no Docker daemon answers or the image
cannot be built. The ActiveMQ image is built once per session (cached by recipe hash)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def activemq_image() -> str:
    from harness import images

    try:
        images.docker_client()
    except images.ImageError as e:
        pytest.skip(f"docker backend: {e}")
    try:
        tag, _built, _secs = images.build(images.activemq_recipe())
    except images.ImageError as e:
        pytest.skip(f"docker backend: the ActiveMQ image cannot be built: {str(e)[:500]}")
    return tag


@pytest.fixture
def backend_kind(activemq_image: str) -> str:
    """Scenarios under tests/docker always run on the docker backend (image built first)."""
    return "docker"
