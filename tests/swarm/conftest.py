"""The swarm backend's tests: a one-node swarm made for each test (`docker swarm init
--advertise-addr 127.0.0.1`) and always left after (`docker swarm leave --force`), with what it made
removed; skipped when no Docker daemon answers, the member image cannot be built, or a swarm this
session did not make is already active (not ours to leave). One swarm per host: under xdist, a file
lock makes the tests of other workers wait for it (each test takes 40-90 s)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: the swarm's own networks: docker_gwbridge appears when the node starts its first task; both
#: go with the swarm (removed here after leaving it). Other networks are other tests' (Docker backend).
SWARM_NETWORKS = {"ingress", "docker_gwbridge"}


def networks(client: Any) -> set[str]:
    return {n.name for n in client.networks.list()}


def swarm_state(client: Any) -> str:
    return str((client.info().get("Swarm") or {}).get("LocalNodeState"))


@pytest.fixture
def swarm() -> Iterator[Any]:
    from harness.deploy import images

    try:
        client = images.docker_client()
    except images.ImageError as e:
        pytest.skip(f"swarm backend: {e}")
    with (Path(tempfile.gettempdir()) / "bfh-swarm-tests.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker's swarm test: wait until it has left
        yield from _one_node_swarm(client)


def _one_node_swarm(client: Any) -> Iterator[Any]:
    from harness.deploy import images

    if swarm_state(client) != "inactive":
        pytest.skip("a swarm is already active on this host: not ours to init or leave")
    before = networks(client) & SWARM_NETWORKS
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
        for name in (networks(client) & SWARM_NETWORKS) - before:  # docker_gwbridge outlives the swarm
            with contextlib.suppress(Exception):
                client.networks.get(name).remove()
        assert swarm_state(client) == "inactive", "the swarm is still active"
        left = (networks(client) & SWARM_NETWORKS) - before
        assert not left, f"the swarm's networks left behind: {left}"
