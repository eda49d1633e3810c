"""Addresses of the fault proxy's listeners and upstreams: `host:port` parsing and joining, and
whether an upstream is the proxy's own listen address (a loop)."""

from __future__ import annotations

from harness.faultproxy.toxics import ApiError


def split_hostport(addr: str, what: str) -> tuple[str, int]:
    """'host:port', '[v6]:port' or ':port' -> (host, port); ApiError 400 if malformed."""
    if not isinstance(addr, str) or ":" not in addr:
        raise ApiError(400, f"bad {what} address {addr!r}: expected host:port")
    host, _, port_s = addr.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_s)
    except ValueError:
        raise ApiError(400, f"bad {what} address {addr!r}: port is not a number") from None
    if not 0 <= port <= 65535:
        raise ApiError(400, f"bad {what} address {addr!r}: port out of range")
    return host, port


_ANY = ("", "0.0.0.0", "::")
_LOOPBACK = ("localhost", "::1", "0:0:0:0:0:0:0:1")


def _local(host: str) -> str:
    """'any' (a wildcard listen), 'loopback', or the host itself, lowercased."""
    h = host.strip("[]").lower()
    if h in _ANY:
        return "any"
    if h in _LOOPBACK or h.startswith("127.") or h.endswith(".localhost"):
        return "loopback"
    return h


def same_endpoint(upstream: str, listen: str) -> bool:
    """Whether dialling `upstream` reaches a socket listening on `listen` (127.0.0.1, localhost,
    ::1 and the wildcards 0.0.0.0/:: counted as one machine; other names compared as written)."""
    try:
        uh, up = split_hostport(upstream, "upstream")
        lh, lp = split_hostport(listen, "listen")
    except ApiError:
        return False
    if up != lp or up == 0:
        return False
    u, ln = _local(uh), _local(lh)
    if u == "any":
        u = "loopback"  # dialling 0.0.0.0 reaches the local machine
    return ln == "any" or u == ln


def join_hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
