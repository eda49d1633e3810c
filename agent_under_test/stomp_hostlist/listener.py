"""What one stomp.py connection of the host-list agent hears, and the waits on it (each looks at
the agent's `stop`, so SIGTERM ends them within POLL_S)."""

from __future__ import annotations

import threading
import time
from typing import Any

import stomp

POLL_S = 0.05  # how often a wait looks at `stop`


class Listener(stomp.ConnectionListener):
    """Collects what one connection hears; callbacks run on stomp.py's threads."""

    def __init__(self, stop: threading.Event, on_message: Any = None) -> None:
        self.cond = threading.Condition()
        self.stop = stop
        self.connected = False
        self.host: tuple[str, int] | None = None
        self.receipts: set[str] = set()
        self.errors: dict[str | None, str] = {}
        self.lost: str | None = None
        self.on_message_cb = on_message

    def on_connecting(self, host_and_port: tuple[str, int]) -> None:
        self.host = host_and_port

    def on_connected(self, frame: Any) -> None:
        with self.cond:
            self.connected = True
            self.cond.notify_all()

    def on_receipt(self, frame: Any) -> None:
        with self.cond:
            self.receipts.add(frame.headers.get("receipt-id", ""))
            self.cond.notify_all()

    def on_error(self, frame: Any) -> None:
        with self.cond:
            self.errors[frame.headers.get("receipt-id")] = frame.headers.get("message", "ERROR")
            self.cond.notify_all()

    def on_disconnected(self) -> None:
        with self.cond:
            self.lost = self.lost or "connection_lost: socket closed"
            self.cond.notify_all()

    def on_heartbeat_timeout(self) -> None:
        with self.cond:
            self.lost = "liveness_timeout: heart-beat missed"
            self.cond.notify_all()

    def on_message(self, frame: Any) -> None:
        if self.on_message_cb is not None:
            self.on_message_cb(frame)

    def wait_receipt(self, rid: str, timeout: float) -> str | None:
        """None when the receipt arrived, else why not (polls `stop`: SIGTERM ends the wait)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while rid not in self.receipts:
                if rid in self.errors:
                    return f"ERROR {self.errors[rid]}"
                if self.lost:
                    return self.lost
                if self.stop.is_set():
                    return "shutdown"
                left = deadline - time.monotonic()
                if left <= 0:
                    return f"no receipt within {timeout:g} s"
                self.cond.wait(min(left, POLL_S))
            self.receipts.discard(rid)
        return None

    def wait_connected(self, timeout: float) -> str | None:
        """None once CONNECTED came, else why not. stomp.py's own wait (connect(wait=True)) has no
        timeout and never looks at `stop`: a black hole that accepts TCP held SIGTERM."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not self.connected:
                if None in self.errors:
                    return f"ERROR {self.errors[None]}"
                if self.lost:
                    return "closed before CONNECTED"
                if self.stop.is_set():
                    return "shutdown"
                left = deadline - time.monotonic()
                if left <= 0:
                    return f"no CONNECTED within {timeout:g} s"
                self.cond.wait(min(left, POLL_S))
        return None
