"""Bridges from broker containers to the fault proxy on the host (Docker backend)."""

from __future__ import annotations

import contextlib
import socket
import threading

from harness.backends.brokerfiles import listening_ports
from harness.deploy.plan import HOST


class GatewayRelay:
    """Plain TCP relays from the run network's gateway address to the fault proxy's bridge links.

    The proxy listens on 127.0.0.1, which a container cannot reach; a bridge from a broker
    container dials `host.docker.internal` (the run network's gateway), and this relay hands the
    bytes to the proxy link unchanged, so the link's faults still apply to broker<->broker traffic.
    """

    def __init__(self, gateway: str, ports: list[int]) -> None:
        self.gateway = gateway
        self.ports = ports
        self._servers: dict[int, socket.socket] = {}
        self._stop = threading.Event()
        self._sync()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            self._sync()

    def _sync(self) -> None:
        """Listen exactly while the proxy link listens: a bridge dialing a refusing link must be
        refused too (an accept-then-close would look like a connected, then dropped, bridge)."""
        up = listening_ports() or set()
        for port in self.ports:
            srv = self._servers.get(port)
            if port in up and srv is None:
                srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    srv.bind((self.gateway, port))
                except OSError:
                    srv.close()
                    continue
                srv.listen(16)
                srv.settimeout(0.5)
                self._servers[port] = srv
                threading.Thread(target=self._accept, args=(srv, port), daemon=True).start()
            elif port not in up and srv is not None:
                self._servers.pop(port).close()

    def _accept(self, srv: socket.socket, port: int) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                up = socket.create_connection((HOST, port), timeout=5)
            except OSError:
                conn.close()  # the proxy link refuses (its broker does not listen): so do we
                continue
            for a, b in ((conn, up), (up, conn)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        src.settimeout(None)
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def close(self) -> None:
        self._stop.set()
        for srv in self._servers.values():
            srv.close()
        self._servers.clear()
