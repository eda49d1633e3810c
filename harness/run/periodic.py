"""A bookkeeping thread: calls a function every few seconds during a run, never failing it
(the run loop's samplers: brokersampler.py, loadprobe.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class Periodic:
    def __init__(self, every_s: float, fn: Callable[[], Any], name: str) -> None:
        self.every_s, self.fn, self.name = every_s, fn, name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.fn()
            except Exception:  # noqa: BLE001 - bookkeeping only: never fails a run
                continue

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop and join the thread; False when it was never started."""
        if self._thread is None:
            return False
        self._stop.set()
        self._thread.join(timeout=timeout)
        self._thread = None
        return True
