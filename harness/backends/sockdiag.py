"""The TCP ports in LISTEN state in this network namespace, asked of the kernel over netlink
(sock_diag, the interface `ss` uses).

Why not /proc/net/tcp: reading it walks every bucket of the kernel's TCP hash tables, however few
sockets there are: about 7 ms of kernel time per read of tcp + tcp6 on this 24 GiB machine. The
link mirror polls ten times a second per run, so in the test suite that alone kept ~10 % of a core
busy per worker. A sock_diag dump filtered on LISTEN walks only the listening sockets.
"""

from __future__ import annotations

import socket
import struct
from collections import Counter

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
TCP_ESTABLISHED, TCP_LISTEN = 1, 10
_HEADER = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, pid
# inet_diag_req_v2: family, protocol, ext, pad, states; then inet_diag_sockid (48 bytes, zeroed)
_REQUEST = struct.Struct("=BBBBI48x")
_SPORT_OFFSET = 4  # inet_diag_msg: family, state, timer, retrans, then the sockid (sport first)


def listening_tcp_ports(timeout: float = 2.0) -> set[int] | None:
    """Ports with a TCP socket in LISTEN state (IPv4 and IPv6); None when netlink cannot say
    (no sock_diag in this kernel, or a sandbox forbidding netlink): callers fall back to /proc."""
    counts = _dump(1 << TCP_LISTEN, timeout)
    return None if counts is None else set(counts)


def established_by_port(timeout: float = 2.0) -> Counter[int] | None:
    """Established TCP sockets per local port (IPv4 and IPv6): a server's accepted connections on
    its listening port (harness/run/brokersampler.py counts each broker's); None as above."""
    return _dump(1 << TCP_ESTABLISHED, timeout)


def _dump(states: int, timeout: float) -> Counter[int] | None:
    """Sockets per local port in `states` (a bit mask of TCP states)."""
    ports: Counter[int] = Counter()
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as s:
            s.settimeout(timeout)
            for seq, family in enumerate((socket.AF_INET, socket.AF_INET6), start=1):
                body = _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, states)
                flags = NLM_F_REQUEST | NLM_F_DUMP
                s.send(_HEADER.pack(_HEADER.size + len(body), SOCK_DIAG_BY_FAMILY, flags, seq, 0) + body)
                if not _read_dump(s, seq, ports):
                    return None
    except OSError:
        return None
    return ports


def _read_dump(s: socket.socket, seq: int, ports: Counter[int]) -> bool:
    """Read one dump's replies into `ports`; False on a netlink error."""
    while True:
        data = s.recv(65536)
        if not data:
            return False
        off = 0
        while off + _HEADER.size <= len(data):
            length, kind, _flags, got_seq, _pid = _HEADER.unpack_from(data, off)
            if length < _HEADER.size:
                return False
            if got_seq == seq:
                if kind == NLMSG_DONE:
                    return True
                if kind == NLMSG_ERROR:
                    return False
                if kind == SOCK_DIAG_BY_FAMILY:
                    (port,) = struct.unpack_from("!H", data, off + _HEADER.size + _SPORT_OFFSET)
                    ports[port] += 1
            off += (length + 3) & ~3  # NLMSG_ALIGN
