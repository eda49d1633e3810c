"""When a starting broker is ready: one wait strategy for both backends.

In testcontainers' style, "until X is observed, with a bound": `wait_until` polls a check until it
returns a value, and `BrokerReady` is the broker's X. Ready = the broker log says `Apache ActiveMQ
... (<name>, ...) started` and its openwire port listens ("master"), or, unless a master is wanted,
the log says it waits for the store lock ("slave"). It fails at once, with the log's diagnosis,
when the broker died, logged a fatal start error, or logged "started" without listening on its
openwire port within `grace` (the connector lines of its log are shown: e.g. an imported config
serving its own ports). Each backend shows it a `BrokerView`: how it sees that one broker.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from harness.backends.base import BackendError
from harness.deploy.plan import HOST, BrokerPlan

STARTED = re.compile(r"Apache ActiveMQ \S+ \((?P<name>[^,]+), [^)]*\) started")
SLAVE = re.compile(r"is now in slave mode|waiting a lock to be acquired|[Ww]aiting for lock")
FATAL = re.compile(
    r"Address already in use|Failed to start Apache ActiveMQ|BeanDefinitionStoreException|"
    r"XmlBeanDefinitionStoreException|java\.lang\.OutOfMemoryError|Could not create Transport"
)
CONNECTOR_LINE = re.compile(
    r"Listening for connections at|Connector \S+ [Ss]tarted|transportConnector|Connector "
)
START_TIMEOUT = 60.0
# After "started", how long the openwire port may take to show up before the start is a failure.
CONNECTOR_GRACE = 5.0

T = TypeVar("T")


def wait_until(
    check: Callable[[], T | None],
    timeout: float,
    what: str,
    interval: float = 0.05,
    diagnose: Callable[[], str] | None = None,
) -> T:
    """Poll `check` until it returns something other than None (returned), at most `timeout`
    seconds; then raise BackendError "<what> not observed within <timeout> s" (plus `diagnose()`).
    A BackendError raised by `check` ends the wait at once."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got is not None:
            return got
        if time.monotonic() > deadline:
            more = diagnose() if diagnose is not None else ""
            raise BackendError(f"{what} not observed within {timeout:.0f}s" + (f"; {more}" if more else ""))
        time.sleep(interval)


@dataclass
class BrokerView:
    """How a backend sees one starting broker."""

    broker: BrokerPlan
    alive: Callable[[], bool]
    log: Callable[[], str]  # the broker log written since this start
    serving: Callable[[], bool]  # its openwire port listens
    tail: Callable[[], str]  # the diagnosis shown with a failure
    exit_code: Callable[[], object] = lambda: "?"


class BrokerReady:
    """The broker's wait strategy: `wait(view)` returns "master" or "slave" or raises BackendError."""

    def __init__(
        self, want_master: bool, timeout: float = START_TIMEOUT, grace: float = CONNECTOR_GRACE
    ) -> None:
        self.want_master = want_master
        self.timeout = timeout
        self.grace = grace

    def wait(self, view: BrokerView) -> str:
        started_at: list[float] = []
        name = view.broker.name

        def observed() -> str | None:
            log = view.log()
            if not view.alive():
                raise BackendError(
                    f"broker {name} died at start (exit {view.exit_code()}); log tail:\n" + view.tail()
                )
            fatal = FATAL.search(log)
            if fatal:
                what = f"broker {name} failed at start ({fatal.group(0)})"
                raise BackendError(f"{what}; log tail:\n" + view.tail())
            if STARTED.search(log):
                if view.serving():
                    return "master"
                started_at.append(started_at[0] if started_at else time.monotonic())
                if time.monotonic() - started_at[0] > self.grace:
                    raise BackendError(wrong_connectors(view.broker, log))
            if not self.want_master and SLAVE.search(log):
                return "slave"
            return None

        return wait_until(
            observed,
            self.timeout,
            f"broker {name} ready (serving, or waiting for the store lock)",
            diagnose=lambda: "log tail:\n" + view.tail(),
        )


def wrong_connectors(b: BrokerPlan, log: str) -> str:
    """A broker that started but does not serve the connectors the harness gave it: say so, with
    the connector lines of its log."""
    lines = [ln.strip() for ln in log.splitlines() if CONNECTOR_LINE.search(ln)]
    want = ", ".join(f"{c} {HOST}:{port}" for c, port in b.ports.items())
    return (
        f"broker {b.name} started but does not listen on its openwire port {b.ports['openwire']} "
        f"(expected connectors: {want}); its log's connector lines:\n"
        + ("\n".join(lines[-10:]) or "(none: the broker opened no transport connector)")
        + f"\nFix: check the transportConnectors of {b.conf_dir / 'activemq.xml'}"
    )
