"""The reference agent: semantics in docs/agent-semantics.md, contracts in docs/contracts.md.

Threads:
- one `Subscriber` per workload subscription, each with its own connection and client id, each
  failing over on its own (connect to the first URL of `mb.urls` that accepts, every time);
- one `Publisher`: a sender thread that owns the publish connection, schedules the publication
  streams and enforces each message's deadline, plus a connector thread that (re)connects it, so
  a black-holed broker never delays a drop or a subscriber.

Behaviour that the seeded-defect agents change is isolated in the small hook methods of
`ReferenceAgent` (urls, connect_timeout, subscription_mode, ...) and of `Publisher`.

Over 500 lines: the seeded-defect agents subclass these classes and override their hooks, so the
hooks and the threads that call them stay in one module.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import random
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent_under_test.config import AgentConf, BrokerUrl, Publication, Subscription, Workload, client_id
from agent_under_test.reference.transport import Link, LinkError, OnMessage, Transport, make_transport
from harness.contracts.msglog import MessageLogWriter

SHUTDOWN_BUDGET_S = 7.0


def note(text: str) -> None:
    """One diagnostic line on stderr (never secrets)."""
    print(f"agent: {text}", file=sys.stderr, flush=True)


class Backoff:
    """Capped exponential backoff with jitter: delays in [d/2, d], d = initial * 2^n <= cap."""

    def __init__(self, initial: float, cap: float, rng: random.Random) -> None:
        self.initial = min(initial, cap)
        self.cap = cap
        self.rng = rng
        self._d = self.initial

    def next(self) -> float:
        d = self._d
        self._d = min(self.cap, self._d * 2)
        return self.rng.uniform(d / 2, d)

    def reset(self) -> None:
        self._d = self.initial


def parse_msg_id(payload: bytes) -> str | None:
    try:
        obj = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(obj, dict) and isinstance(obj.get("msg_id"), str):
        return str(obj["msg_id"])
    return None


def make_payload(msg_id: str, sent_ts: float, size: int) -> bytes:
    """A JSON object with msg_id and sent_ts, padded to `size` bytes when it is larger."""
    body = {"msg_id": msg_id, "sent_ts": sent_ts, "pad": ""}
    raw = json.dumps(body, separators=(",", ":"))
    if len(raw) < size:
        body["pad"] = "x" * (size - len(raw))
        raw = json.dumps(body, separators=(",", ":"))
    return raw.encode()


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
            workload.protocol, conf, self.keepalive(), self.liveness_timeout()
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
            why = self.link_dead(link)
            if why is not None:
                return why
        return "shutdown"

    # ---- lifecycle ---------------------------------------------------------------------------
    def run(self) -> int:
        self.subscribers = self.make_subscribers()
        for s in self.subscribers:
            s.start()
        deadline = time.monotonic() + self.conf.subscribe_wait
        while not self.stop.is_set() and time.monotonic() < deadline:
            if all(s.ready.is_set() for s in self.subscribers):
                break
            self.stop.wait(0.05)
        if not self.stop.is_set() and not all(s.ready.is_set() for s in self.subscribers):
            note(f"subscriptions not confirmed within {self.conf.subscribe_wait:g} s; publishing anyway")
        if self.wl.publications and not self.stop.is_set():
            self.publisher = self.make_publisher()
            self.publisher.start()
        while not self.stop.wait(0.5):
            pass
        return self.shutdown()

    def shutdown(self) -> int:
        end = time.monotonic() + SHUTDOWN_BUDGET_S
        workers: list[threading.Thread] = []
        for s in self.subscribers:
            workers.extend(s.threads())
        if self.publisher is not None:
            workers.extend(self.publisher.threads())
        for t in workers:
            t.join(max(0.0, end - time.monotonic()))
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


@dataclass
class OutMsg:
    msg_id: str
    topic: str
    qos: int
    payload: bytes
    first_attempt: float  # time.monotonic()
    deadline: float
    attempts: int = 0
    handed: int = 0  # times handed to a broker connection
    extra: dict[str, object] = field(default_factory=dict)


class Publisher:
    """The publication streams, one publish connection, a deadline per message."""

    role = "publisher"

    def __init__(self, agent: ReferenceAgent) -> None:
        self.a = agent
        self.cid = agent.client_id("pub")
        self.timeout = agent.publish_timeout()
        self.window = agent.conf.publisher_inflight
        self.pending: deque[OutMsg] = deque()
        self.inflight: dict[int, OutMsg] = {}
        self.link: Link | None = None
        self.done = threading.Event()
        self._slot: Link | None = None
        self._lock = threading.Lock()
        self._want = threading.Event()
        self._wake = threading.Event()
        self._tokens = itertools.count(1)
        self._connects = 0
        self._first_cycle = threading.Event()
        self._sender = threading.Thread(target=self._run_sender, name="pub-sender", daemon=True)
        self._connector = threading.Thread(target=self._run_connector, name="pub-connector", daemon=True)

    def start(self) -> None:
        self._want.set()
        self._connector.start()
        self._sender.start()

    def threads(self) -> list[threading.Thread]:
        return [self._sender, self._connector]

    # ---- hooks ---------------------------------------------------------------------------------
    def deadline_for(self, first_attempt: float) -> float:
        return first_attempt + self.timeout

    def on_new_link(self, link: Link) -> None:
        """Called when the sender adopts a fresh connection."""

    def on_acked(self, msg: OutMsg) -> None:
        """Called after a message was logged `sent`."""

    # ---- connector thread ----------------------------------------------------------------------
    def _run_connector(self) -> None:
        a = self.a
        backoff = a.publisher_backoff()
        while not a.stop.is_set() and not self.done.is_set():
            if not self._want.wait(0.2):
                continue
            with self._lock:
                busy = self._slot is not None or self.link is not None
                if busy:
                    self._want.clear()
            if busy:
                continue
            link, err = a.connect_first_available(
                self.role, self.cid, False, None, "initial" if self._connects == 0 else "reconnect"
            )
            self._first_cycle.set()
            if link is not None:
                self._connects += 1
                with self._lock:
                    self._slot = link
                    self._want.clear()
                self._wake.set()
                backoff.reset()
            else:
                a.stop.wait(a.retry_delay(backoff, err))
        with self._lock:
            stale, self._slot = self._slot, None
        if stale is not None:
            stale.close()

    # ---- sender thread -------------------------------------------------------------------------
    def _run_sender(self) -> None:
        a = self.a
        pubs = a.wl.publications
        # Start the streams once the first connect cycle is over (connected or not), so the
        # first messages are not counted as attempts without a broker just because of start-up.
        while not a.stop.is_set() and not self._first_cycle.wait(0.1):
            pass
        t0 = time.monotonic()
        heap = [(t0, i, 0) for i, p in enumerate(pubs) if p.count > 0]
        heapq.heapify(heap)
        qos = [a.publication_qos(p) for p in pubs]
        step = min(a.conf.liveness_interval, 0.25)
        while not a.stop.is_set():
            now = time.monotonic()
            if self.link is None:
                self._take_link()
            # release the messages that are due: their first attempt starts now
            while heap and heap[0][0] <= now:
                _due, i, seq = heapq.heappop(heap)
                p = pubs[i]
                if seq + 1 < p.count:
                    heapq.heappush(heap, (t0 + (seq + 1) / p.rate_per_s, i, seq + 1))
                self._release(f"{a.wl.agent}-{i}-{seq}", p, qos[i], now)
            self._expire(now)
            if self.link is not None:
                self._send_pending()
            if not heap and not self.pending and not self.inflight:
                self._finish()
                return
            nxt = now + step
            if heap:
                nxt = min(nxt, heap[0][0])
            if self.pending:
                nxt = min(nxt, self.pending[0].deadline)
            wait = max(0.0, nxt - time.monotonic())
            if self.link is not None:
                if self.pending and len(self.inflight) < self.window:
                    wait = 0.0
                for token in self.link.pump(wait):
                    self._acked(token)
                why = a.link_dead(self.link)
                if why is not None:
                    self._lose_link(why)
            else:
                self._want.set()
                self._wake.wait(wait)
                self._wake.clear()
        self._shutdown()

    def _take_link(self) -> None:
        """Adopt the link the connector thread left in the slot, if any."""
        with self._lock:
            link, self._slot = self._slot, None
            self.link = link
        if link is not None:
            self.on_new_link(link)

    def _release(self, msg_id: str, p: Publication, qos: int, now: float) -> None:
        """A message falls due: pending from now (with no link, that is a first attempt already)."""
        msg = OutMsg(
            msg_id=msg_id,
            topic=p.topic,
            qos=qos,
            payload=make_payload(msg_id, time.time(), p.payload_bytes),
            first_attempt=now,
            deadline=self.deadline_for(now),
        )
        self.pending.append(msg)
        if self.link is None:
            msg.attempts += 1
            self.a.log.write(
                "send_attempt",
                msg_id=msg.msg_id,
                topic=msg.topic,
                broker=None,
                attempt=msg.attempts,
                qos=msg.qos,
                reason="no_broker",
            )

    def _send_pending(self) -> None:
        link = self.link
        assert link is not None
        while self.pending and len(self.inflight) < self.window and not link.closed:
            msg = self.pending.popleft()
            msg.attempts += 1
            msg.handed += 1
            token = next(self._tokens)
            self.inflight[token] = msg
            self.a.log.write(
                "send_attempt",
                msg_id=msg.msg_id,
                topic=msg.topic,
                broker=link.broker,
                attempt=msg.attempts,
                qos=msg.qos,
            )
            link.publish(msg.topic, msg.payload, msg.qos, token)

    def _acked(self, token: int) -> None:
        msg = self.inflight.pop(token, None)
        if msg is None or self.link is None:
            return
        self.a.log.write(
            "sent",
            msg_id=msg.msg_id,
            topic=msg.topic,
            broker=self.link.broker,
            attempts=msg.attempts,
            qos=msg.qos,
        )
        self.on_acked(msg)

    def should_drop(self, msg: OutMsg, now: float) -> bool:
        """Whether a message waiting to be (re)sent is given up now."""
        return msg.deadline <= now

    def _expire(self, now: float) -> None:
        # pending is ordered by first attempt, and so by deadline (in-flight messages are never
        # dropped: they wait for their ack or for the connection to die)
        while self.pending and self.should_drop(self.pending[0], now):
            msg = self.pending.popleft()
            self.a.log.write(
                "dropped",
                msg_id=msg.msg_id,
                topic=msg.topic,
                reason="publisher_timeout",
                attempts=msg.attempts,
                handed_to_broker=msg.handed > 0,
            )

    def _lose_link(self, why: str) -> None:
        link = self.link
        assert link is not None
        link.close()
        self.a.log.write("disconnected", broker=link.broker, role=self.role, reason=why)
        # Unacknowledged messages go back to the head of the queue, oldest first; they keep their
        # first-attempt time and so their deadline.
        for msg in sorted(self.inflight.values(), key=lambda m: m.first_attempt, reverse=True):
            self.pending.appendleft(msg)
        self.inflight.clear()
        with self._lock:
            self.link = None
        self._want.set()

    def _finish(self) -> None:
        self.done.set()
        with self._lock:
            link, self.link = self.link, None
        if link is not None:
            link.close()
            self.a.log.write(
                "disconnected", broker=link.broker, role=self.role, reason="publications_complete"
            )

    def _shutdown(self) -> None:
        self.done.set()
        for msg in self.pending:
            if msg.handed == 0:
                self.a.log.write(
                    "dropped",
                    msg_id=msg.msg_id,
                    topic=msg.topic,
                    reason="shutdown",
                    attempts=msg.attempts,
                    handed_to_broker=False,
                )
        self.pending.clear()
        with self._lock:
            link, self.link = self.link, None
        if link is not None:
            with contextlib.suppress(Exception):
                link.close()
            self.a.log.write("disconnected", broker=link.broker, role=self.role, reason="shutdown")
