"""The reference agent: semantics in docs/agent-semantics.md, contracts in docs/contracts.md.

Threads:
- one `Subscriber` per workload subscription, each with its own connection and client id, each
  failing over on its own (connect to the first URL of `mb.urls` that accepts, every time);
- one `Publisher`: a sender thread that owns the publish connection, schedules the publication
  streams and enforces each message's deadline, plus a connector thread that (re)connects it, so
  a black-holed broker never delays a drop or a subscriber.

Behaviour that the seeded-defect agents change is isolated in the small hook methods of
`ReferenceAgent` (urls, connect_timeout, subscription_mode, ...) and of `Publisher`.

The publisher is in agent_under_test.reference.publisher, the backoff in .backoff; their names
stay importable from here.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from agent_under_test.config import AgentConf, BrokerUrl, Publication, Subscription, Workload, client_id
from agent_under_test.reference.backoff import Backoff
from agent_under_test.reference.publisher import OutMsg, Publisher
from agent_under_test.reference.transport import Link, LinkError, OnMessage, Transport, make_transport
from harness.contracts.msglog import MessageLogWriter

__all__ = ["Backoff", "OutMsg", "Publisher", "ReferenceAgent", "Subscriber", "note", "parse_msg_id"]

SHUTDOWN_BUDGET_S = 7.0
# How long the roles get to close their links politely (DISCONNECT and its receipt) before the
# sockets of those still blocked are shut down under them (issue 42: the exit is due within 2 s).
POLITE_CLOSE_S = 0.5


def note(text: str) -> None:
    """One diagnostic line on stderr (never secrets)."""
    print(f"agent: {text}", file=sys.stderr, flush=True)


def parse_msg_id(payload: bytes) -> str | None:
    try:
        obj = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(obj, dict) and isinstance(obj.get("msg_id"), str):
        return str(obj["msg_id"])
    return None


class ReferenceAgent:
    """The reference agent. Subclasses (agent_under_test.defects) override one hook each."""

    variant = "reference"

    def __init__(self, conf: AgentConf, workload: Workload, log_path: str | Path) -> None:
        self.conf = conf
        self.wl = workload
        self.log = MessageLogWriter(log_path, workload.run, workload.agent)
        self.stop = threading.Event()
        self.rng = random.Random()
        self.transport: Transport = make_transport(
            workload.protocol, conf, self.keepalive(), self.liveness_timeout(), self.stop
        )
        self.subscribers: list[Subscriber] = []
        self.publisher: Publisher | None = None

    # ---- hooks --------------------------------------------------------------------------------
    def urls(self) -> list[BrokerUrl]:
        """The brokers, in the order tried on every (re)connect."""
        return list(self.conf.urls)

    def connect_timeout(self) -> float | None:
        """Bound on TCP connect + CONNACK/CONNECTED (and SUBACK/receipt) of every attempt."""
        return self.conf.connect_timeout

    def keepalive(self) -> int:
        return self.conf.keepalive

    def liveness_timeout(self) -> float:
        return self.conf.effective_liveness_timeout

    def subscription_mode(self, sub: Subscription) -> tuple[int, bool]:
        """(qos, durable) actually used for a subscription."""
        return sub.qos, sub.durable and sub.qos >= 1

    def publication_qos(self, pub: Publication) -> int:
        return pub.qos

    def publish_timeout(self) -> float:
        """Seconds from a message's first attempt until the publisher drops it."""
        return float(self.conf.publisher_timeout)

    def retry_delay(self, backoff: Backoff, error: LinkError | None) -> float:
        """Pause after a connect cycle in which no broker accepted."""
        return backoff.next()

    def make_subscribers(self) -> list[Subscriber]:
        return [Subscriber(self, i, s) for i, s in enumerate(self.wl.subscriptions)]

    def make_publisher(self) -> Publisher:
        return Publisher(self)

    # ---- shared machinery --------------------------------------------------------------------
    def new_backoff(self) -> Backoff:
        return Backoff(self.conf.backoff_initial, self.conf.backoff_cap, self.rng)

    def publisher_backoff(self) -> Backoff:
        """Backoff of the publisher's connector between passes over the list."""
        return self.new_backoff()

    def client_id(self, role: str) -> str:
        return client_id(self.conf.client_id_prefix, self.wl.run, self.wl.agent, role)

    def received_handler(self, subscription: str, url: BrokerUrl) -> OnMessage:
        def handler(topic: str, payload: bytes) -> None:
            self.log.write(
                "received",
                msg_id=parse_msg_id(payload),
                topic=topic,
                broker=url.key,
                subscription=subscription,
            )

        return handler

    def connect_first_available(
        self,
        role: str,
        cid: str | None,
        durable: bool,
        on_message: Callable[[BrokerUrl], OnMessage] | None,
        reason: str,
    ) -> tuple[Link | None, LinkError | None]:
        """Try the URLs in list order; return the first link whose handshake succeeded."""
        last: LinkError | None = None
        for url in self.urls():
            if self.stop.is_set():
                break
            handler = on_message(url) if on_message is not None else None
            try:
                link = self.transport.connect(url, cid, durable, handler, self.connect_timeout())
            except LinkError as e:
                if e.kind == "shutdown":  # abandoned, not failed
                    break
                self.log.write("disconnected", broker=url.key, role=role, reason=f"connect_failed: {e}")
                last = e
                continue
            self.log.write("connected", broker=link.broker, role=role, reason=reason)
            return link, None
        return None, last

    def log_subscribed(self, sub: Subscriber, broker: str) -> None:
        """The `subscribed` record, written once the broker confirmed (SUBACK / receipt)."""
        self.log.write("subscribed", topic=sub.sub.topic, broker=broker, qos=sub.qos, durable=sub.durable)

    def link_dead(self, link: Link) -> str | None:
        """Why `link` must be abandoned, or None while it is healthy."""
        if link.closed_reason is not None:
            return link.closed_reason
        silent = time.monotonic() - link.last_inbound()
        if silent > self.liveness_timeout():
            return f"liveness_timeout: nothing from the broker for {silent:.1f} s"
        return None

    def serve(self, link: Link) -> str:
        """Keep a subscriber link until it dies or the agent stops; return the reason."""
        step = min(self.conf.liveness_interval, 0.25)
        while not self.stop.is_set():
            link.pump(step)
            if self.stop.is_set():  # a link shut down under a slow role by the stop (shutdown())
                break
            why = self.link_dead(link)
            if why is not None:
                return why
        return "shutdown"

    # ---- lifecycle ---------------------------------------------------------------------------
    def run(self) -> int:
        self.transport.stop = self.stop  # also a transport a subclass put in place
        self.subscribers = self.make_subscribers()
        for s in self.subscribers:
            s.start()
        deadline = time.monotonic() + self.conf.subscribe_wait
        while not self.stop.is_set() and time.monotonic() < deadline:
            if all(s.ready.is_set() for s in self.subscribers):
                break
            time.sleep(0.05)  # not stop.wait: see below
        if not self.stop.is_set() and not all(s.ready.is_set() for s in self.subscribers):
            note(f"subscriptions not confirmed within {self.conf.subscribe_wait:g} s; publishing anyway")
        if self.wl.publications and not self.stop.is_set():
            self.publisher = self.make_publisher()
            self.publisher.start()
        # The main thread, where SIGTERM's handler runs, never waits on `stop`: Event.wait holds the
        # event's lock between bytecodes, and the handler's stop.set() would deadlock on it. A
        # packed member runs on its own thread and waits: 1,000 members polling 20 times a second
        # kept their processes' threads fighting over the GIL.
        if threading.current_thread() is not threading.main_thread():
            self.stop.wait()
        while not self.stop.is_set():
            time.sleep(0.05)
        return self.shutdown()

    def shutdown(self) -> int:
        start = time.monotonic()
        workers: list[threading.Thread] = []
        for s in self.subscribers:
            workers.extend(s.threads())
        if self.publisher is not None:
            workers.extend(self.publisher.threads())
        for t in workers:
            t.join(max(0.0, start + POLITE_CLOSE_S - time.monotonic()))
        if any(t.is_alive() for t in workers):
            # A role blocked in a send to a paused broker (a full socket buffer) or in a read
            # never sees `stop`: its socket is shut down under it, and it then ends as on a loss.
            self.transport.interrupt_all()
        for t in workers:
            t.join(max(0.0, start + SHUTDOWN_BUDGET_S - time.monotonic()))
        self.log.close()
        return 0


class Subscriber:
    """One subscription: its own thread, connection and client id."""

    def __init__(self, agent: ReferenceAgent, index: int, sub: Subscription) -> None:
        self.a = agent
        self.sub = sub
        self.role = f"subscriber:{sub.topic}"
        self.cid = agent.client_id(f"s{index}")
        self.qos, self.durable = agent.subscription_mode(sub)
        self.ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"sub-{index}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def threads(self) -> list[threading.Thread]:
        return [self._thread]

    def _run(self) -> None:
        a = self.a
        backoff = a.new_backoff()
        reason = "initial"
        while not a.stop.is_set():
            link, err = a.connect_first_available(
                self.role, self.cid, self.durable, lambda url: a.received_handler(self.sub.topic, url), reason
            )
            if link is None:
                a.stop.wait(a.retry_delay(backoff, err))
                continue
            reason = "reconnect"
            try:
                link.subscribe(self.sub.topic, self.qos, self.durable, self.cid, a.connect_timeout())
            except LinkError as e:
                link.close()
                a.log.write(
                    "disconnected", broker=link.broker, role=self.role, reason=f"subscribe_failed: {e}"
                )
                a.stop.wait(a.retry_delay(backoff, e))
                continue
            a.log_subscribed(self, link.broker)
            self.ready.set()
            backoff.reset()
            why = a.serve(link)
            link.close()
            a.log.write("disconnected", broker=link.broker, role=self.role, reason=why)
            if not a.stop.is_set():
                a.stop.wait(backoff.next())
