"""Toxiproxy-2.x-compatible fault proxy: server (`server.main`), API client (`ToxiproxyClient`) and
launcher (`start_fault_proxy`). The client is the only place in the harness that speaks this API.

The server modules use the standard library only (so it can run in a minimal container); the names
below are imported lazily so that `python -m harness.faultproxy` does not load the launcher.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.faultproxy.client import ToxiproxyClient, ToxiproxyError
    from harness.faultproxy.launcher import FaultProxyHandle, start_fault_proxy

__all__ = ["FaultProxyHandle", "ToxiproxyClient", "ToxiproxyError", "start_fault_proxy"]


def __getattr__(name: str) -> Any:
    if name in ("ToxiproxyClient", "ToxiproxyError"):
        from harness.faultproxy import client

        return getattr(client, name)
    if name in ("FaultProxyHandle", "start_fault_proxy"):
        from harness.faultproxy import launcher

        return getattr(launcher, name)
    raise AttributeError(name)
