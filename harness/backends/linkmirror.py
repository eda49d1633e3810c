"""Keep the fault proxy transparent about whether a broker is listening.

A TCP proxy accepts a connection before it dials the upstream. When the broker behind a link is
down (killed, or a slave waiting for the store lock), a client therefore sees "connected, then
closed" instead of "connection refused". For ActiveMQ bridges that difference is fatal:
`masterslave:` / `failover:(...)?randomize=false&maxReconnectAttempts=0` takes the first URI
whose TCP connect succeeds, so a bridge to a pair whose first member died keeps picking the dead
member's proxy and never reaches the new master; and when the close races the bridge start, the
bridge waits forever for the remote BrokerInfo (5.17.2 `FutureBrokerInfo.get` only honours its
timeout once the bridge is disposed). Real brokers refuse connections on ports nobody listens on;
the mirror restores that: a link whose upstream port has no listener is disabled (the proxy stops
listening), and enabled again once the broker listens.

Only links the mirror itself disabled are ever re-enabled, so a `down` fault (which also
disables) is not undone when its broker is up; toxics (partition, latency, ...) are untouched.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from harness.deploy.plan import Plan


class LinkMirror:
    def __init__(
        self, plan: Plan, proxy: Any, listening: Callable[[], set[int] | None], interval: float = 0.1
    ) -> None:
        self.plan = plan
        self.proxy = proxy  # a ToxiproxyClient (enable/disable by link name)
        self.listening = listening
        self.interval = interval
        self.refresh = 1.0
        self._disabled: set[str] = set()  # links this mirror disabled
        self._held: set[str] = set()  # links a fault controls: never touched
        self._upstreams = {lk.upstream_port for lk in plan.links}
        self._last_ports: frozenset[int] | None = None
        self._last_refresh = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.errors: list[str] = []
        self.changes: list[tuple[float, str, bool]] = []  # (time, link, enabled) for diagnostics

    def start(self) -> None:
        self.sync(force=True)
        self._thread = threading.Thread(target=self._run, name="bfh-link-mirror", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sync()
            except Exception as e:  # the proxy may be going away at shutdown
                if len(self.errors) < 100:
                    self.errors.append(f"{type(e).__name__}: {e}")

    def sync(self, force: bool = False) -> None:
        """One pass: disable links to non-listening upstreams, re-enable those now listening.

        The proxy's actual state is read when the listening ports changed and at least every
        `refresh` seconds, so a `reset` (which enables every link) is corrected within that time.
        """
        ports = self.listening()
        if ports is None:
            return
        relevant = frozenset(p for p in ports if p in self._upstreams)
        now = time.monotonic()
        if not force and relevant == self._last_ports and now - self._last_refresh < self.refresh:
            return
        with self._lock:
            proxies = self.proxy.proxies()
            self._last_refresh = now
            for lk in self.plan.links:
                if lk.name in self._held:
                    continue
                actual = bool(proxies.get(lk.name, {}).get("enabled", True))
                up = lk.upstream_port in ports
                if not up and actual:
                    self.proxy.disable(lk.name)
                    self._disabled.add(lk.name)
                    self.changes.append((time.time(), lk.name, False))
                elif up and not actual and lk.name in self._disabled:
                    self.proxy.enable(lk.name)
                    self._disabled.discard(lk.name)
                    self.changes.append((time.time(), lk.name, True))
                elif up and actual:
                    self._disabled.discard(lk.name)
            self._last_ports = relevant

    def sync_now(self) -> None:
        """A forced pass right after a broker changed (kill, start, takeover); never raises: the
        mirror's bookkeeping must not break a fault action."""
        try:
            self.sync(force=True)
        except Exception as e:
            self.errors.append(f"{type(e).__name__}: {e}")

    def hold(self, links: list[str]) -> None:
        """Leave `links` alone until `release` (a fault that disables links should hold them)."""
        with self._lock:
            self._held.update(links)

    def release(self, links: list[str]) -> None:
        """The fault is over: the mirror owns `links` again. A released link that is disabled (a
        heal's reset enabled it and a concurrent pass disabled it again, or the heal left it off)
        is re-enabled as soon as its broker listens."""
        with self._lock:
            self._held.difference_update(links)
            self._disabled.update(links)
        self.sync(force=True)

    def forget(self, link: str) -> None:
        """Someone else re-enabled `link` (e.g. a heal): the mirror re-checks it on its next pass."""
        with self._lock:
            self._disabled.discard(link)
