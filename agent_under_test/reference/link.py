"""The interface both protocols implement: a `Link` (one connection to one broker), a `Transport`
(opens links) and `LinkError`, the failure taxonomy of agent_under_test.reference.transport."""

from __future__ import annotations

import contextlib
import errno
import socket
import ssl
import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from agent_under_test.config import AgentConf, BrokerUrl

OnMessage = Callable[[str, bytes], None]

# A STOMP link's close: how long the broker's DISCONNECT receipt may take before the receiver is
# woken by force, and how long the woken receiver may take to end.
DISCONNECT_RECEIPT_S = 1.0
RECEIVER_STOP_S = 2.0


class LinkError(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


def _socket_error_kind(e: BaseException) -> str:
    if isinstance(e, ssl.SSLError | ssl.CertificateError):
        return "tls"
    if isinstance(e, TimeoutError | socket.timeout):
        return "timeout"
    return "refused"


def _describe(e: BaseException) -> str:
    if isinstance(e, OSError) and e.errno is not None:
        return errno.errorcode.get(e.errno, str(e.errno))
    text = str(e) or type(e).__name__
    return text.splitlines()[0][:200]


class Link(ABC):
    """One connection to one broker. Not thread-safe: one owner thread drives it."""

    def __init__(self, url: BrokerUrl) -> None:
        self.url = url
        self.broker = url.key
        self.closed_reason: str | None = None

    @abstractmethod
    def pump(self, timeout: float) -> list[Any]:
        """Process network I/O for up to `timeout` s; return the tokens of publishes acked since."""

    @abstractmethod
    def last_inbound(self) -> float:
        """time.monotonic() of the last bytes received from the broker."""

    @abstractmethod
    def subscribe(self, topic_filter: str, qos: int, durable: bool, name: str, timeout: float | None) -> None:
        """Subscribe and wait for the broker's confirmation; raise LinkError if refused or silent."""

    @abstractmethod
    def publish(self, topic: str, payload: bytes, qos: int, token: Any) -> None:
        """Send one message; its `token` is returned by a later pump() once the broker acked it."""

    @abstractmethod
    def close(self) -> None:
        """Disconnect (politely if possible); idempotent."""

    def interrupt(self) -> None:
        """Wake, from another thread, whatever blocks on this link's socket (a read, a send into a
        full buffer): a shutdown of the file descriptor, no TLS call; the owner then sees it closed."""
        interrupt_socket(self.raw_socket())

    def raw_socket(self) -> Any:
        """The link's socket once its TCP connection exists, else None."""
        return None

    @property
    def closed(self) -> bool:
        return self.closed_reason is not None


def interrupt_socket(sock: Any) -> None:
    if sock is not None:
        with contextlib.suppress(OSError, ValueError, TypeError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


class Transport(ABC):
    """Opens links to one broker with the protocol's handshake bounded by `timeout`.

    `stop` is the agent's: a handshake in progress gives up when it is set. Every link opened is
    remembered (weakly) so that `interrupt_all` can wake the threads blocked on them at shutdown.
    """

    def __init__(
        self,
        conf: AgentConf,
        keepalive: int | None = None,
        liveness_timeout: float | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.conf = conf
        self.keepalive = keepalive if keepalive is not None else conf.keepalive
        self.liveness_timeout = liveness_timeout or conf.effective_liveness_timeout
        self.stop = stop if stop is not None else threading.Event()
        self._links: weakref.WeakSet[Link] = weakref.WeakSet()
        self._links_lock = threading.Lock()

    def track(self, link: Link) -> None:
        with self._links_lock:
            self._links.add(link)

    def interrupt_all(self) -> None:
        """Wake every thread blocked on a link of this transport (see Link.interrupt)."""
        with self._links_lock:
            links = list(self._links)
        for link in links:
            link.interrupt()

    @abstractmethod
    def connect(
        self,
        url: BrokerUrl,
        client_id: str | None,
        durable: bool,
        on_message: OnMessage | None,
        timeout: float | None,
    ) -> Link: ...
