"""The swarm backend's tests: a one-node swarm made for the session (`docker swarm init
--advertise-addr 127.0.0.1`) and always left after (`docker swarm leave --force`), with what it made
removed; skipped when no Docker daemon answers, the member image cannot be built, or a swarm this
session did not make is already active (not ours to leave)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest


def networks(client: Any) -> set[str]:
    return {n.name for n in client.networks.list()}


def swarm_state(client: Any) -> str:
    return str((client.info().get("Swarm") or {}).get("LocalNodeState"))


@pytest.fixture(scope="session")
def swarm() -> Iterator[Any]:
    from harness.deploy import images

    try:
        client = images.docker_client()
    except images.ImageError as e:
        pytest.skip(f"swarm backend: {e}")
    if swarm_state(client) != "inactive":
        pytest.skip("a swarm is already active on this host: not ours to init or leave")
    before = networks(client)
    try:
        tag, _built, _secs = images.build_member()
    except images.ImageError as e:
        pytest.skip(f"swarm backend: the member image cannot be built: {str(e)[:500]}")
    init = ["docker", "swarm", "init", "--advertise-addr", "127.0.0.1"]
    subprocess.run(init, check=True, capture_output=True)
    # the image just built, whatever the agent's files become meanwhile (its tag hashes them)
    old_image = os.environ.get("BFH_MEMBER_IMAGE")
    os.environ["BFH_MEMBER_IMAGE"] = tag
    try:
        yield client
    finally:
        if old_image is None:
            os.environ.pop("BFH_MEMBER_IMAGE", None)
        else:
            os.environ["BFH_MEMBER_IMAGE"] = old_image
        from harness.backends.swarm import LABEL

        for s in client.services.list(filters={"label": LABEL}):
            with contextlib.suppress(Exception):
                s.remove()
        subprocess.run(["docker", "swarm", "leave", "--force"], check=False, capture_output=True)
        for name in networks(client) - before:  # docker_gwbridge outlives the swarm it served
            with contextlib.suppress(Exception):
                client.networks.get(name).remove()
        assert swarm_state(client) == "inactive", "the swarm is still active"
        assert networks(client) == before, f"networks left behind: {networks(client) - before}"
