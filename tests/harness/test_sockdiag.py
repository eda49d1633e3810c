"""The netlink listener query agrees with /proc/net/tcp{,6} and sees exactly the LISTEN sockets."""

from __future__ import annotations

import os
import socket

from harness.backends.brokerfiles import listening_ports
from harness.backends.sockdiag import listening_tcp_ports


def _agreeing_snapshots() -> tuple[set[int], set[int]]:
    """netlink, /proc, netlink again, until the two netlink reads agree.

    Other xdist workers share this network namespace and open and close listeners at any moment,
    so the two readers are only comparable in a quiet instant: one bracketed by equal netlink reads.
    """
    for _ in range(50):
        before = listening_tcp_ports()
        assert before is not None, "sock_diag unavailable on this machine"
        proc = listening_ports(netns_pid=os.getpid())
        assert proc is not None, "/proc/<pid>/net unreadable"
        after = listening_tcp_ports()
        if before == after:
            return before, proc
    raise AssertionError("the listeners never held still for one /proc read in 50 tries")


def test_listeners_v4_and_v6_seen_and_gone_after_close() -> None:
    v4 = socket.socket(socket.AF_INET)
    v4.bind(("127.0.0.1", 0))
    v4.listen()
    v6 = socket.socket(socket.AF_INET6)
    v6.bind(("::1", 0))
    v6.listen()
    bound_only = socket.socket(socket.AF_INET)  # bound, never listening: not a listener
    bound_only.bind(("127.0.0.1", 0))
    client = socket.create_connection(v4.getsockname())  # an established socket: not a listener
    ports = [s.getsockname()[1] for s in (v4, v6, bound_only)]
    try:
        got, proc = _agreeing_snapshots()
        assert ports[0] in got and ports[1] in got and ports[2] not in got
        assert client.getsockname()[1] not in got
        # the same answer as /proc (read through this process's own namespace path)
        assert got == proc
    finally:
        for s in (client, v4, v6, bound_only):
            s.close()
    after = listening_tcp_ports()
    assert after is not None and ports[0] not in after and ports[1] not in after
