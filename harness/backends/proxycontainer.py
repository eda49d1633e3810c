"""The fault proxy as a testcontainers container of the fault proxy image (Docker backend).

It runs in the host's network namespace on 127.0.0.1, like the local proxy process: behind a
published port, docker-proxy would accept every connection before dialing the proxy, and a link
the mirror disabled would no longer refuse (see linkmirror.py).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from testcontainers.core.container import DockerContainer
from testcontainers.core.wait_strategies import LogMessageWaitStrategy

from harness.deploy.plan import HOST
from harness.faultproxy.launcher import FaultProxyError, FaultProxyHandle, free_port


class ProxyContainer(FaultProxyHandle):
    """The fault proxy in a container of the fault proxy image; `stop` keeps its log and removes it."""

    def __init__(self, url: str, container: Any, log_path: Path) -> None:
        super().__init__(url, "container")
        self.container = container
        self.log_path = log_path

    def stop(self) -> None:
        if self.container is None:
            return
        with contextlib.suppress(Exception):
            out, err = self.container.get_logs()
            self.log_path.write_bytes(out + err)
        with contextlib.suppress(Exception):
            self.container.stop()
        self.container = None


def start_proxy_container(
    tag: str, name: str, labels: dict[str, str], run_dir: Path, seed: int | None = None
) -> FaultProxyHandle:
    """Start the proxy container (image `tag`, present locally) and wait until its API answers."""
    port = free_port()
    cmd = ["-host", HOST, "-port", str(port)] + (["-seed", str(seed)] if seed is not None else [])
    c = (
        DockerContainer(tag, name=name)
        .with_command(cmd)
        .with_kwargs(labels=labels, network_mode="host")
        .waiting_for(LogMessageWaitStrategy("listening on").with_startup_timeout(30))
    )
    try:
        c.start()
    except Exception as e:
        with contextlib.suppress(Exception):
            c.stop()
        raise FaultProxyError(f"fault proxy container ({tag}) did not start: {e}") from None
    handle = ProxyContainer(f"http://{HOST}:{port}", c, Path(run_dir) / "fault-proxy.log")
    try:
        handle.client.wait_ready(20)
    except Exception as e:
        handle.stop()
        raise FaultProxyError(f"fault proxy container ({tag}) does not answer: {e}") from None
    return handle
