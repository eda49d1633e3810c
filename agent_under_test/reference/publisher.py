"""The reference agent's publisher: the publication streams, one publish connection and a deadline
per message (docs/agent-semantics.md). A sender thread owns the connection, schedules the streams
and enforces the deadlines; a connector thread (re)connects it, so a black-holed broker never
delays a drop. The seeded-defect agents override its small hook methods.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from agent_under_test.config import AgentConf, BrokerUrl, Publication, Workload
from agent_under_test.reference.backoff import Backoff
from agent_under_test.reference.transport import Link, LinkError, OnMessage
from harness.contracts.msglog import MessageLogWriter


class PublisherHost(Protocol):
    """What the publisher uses of its agent (agent_under_test.reference.agent.ReferenceAgent)."""

    conf: AgentConf
    wl: Workload
    log: MessageLogWriter
    stop: threading.Event

    def client_id(self, role: str) -> str: ...
    def publish_timeout(self) -> float: ...
    def publication_qos(self, pub: Publication) -> int: ...
    def publisher_backoff(self) -> Backoff: ...
    def retry_delay(self, backoff: Backoff, error: LinkError | None) -> float: ...
    def link_dead(self, link: Link) -> str | None: ...
    def connect_first_available(
        self,
        role: str,
        cid: str | None,
        durable: bool,
        on_message: Callable[[BrokerUrl], OnMessage] | None,
        reason: str,
    ) -> tuple[Link | None, LinkError | None]: ...


def make_payload(msg_id: str, sent_ts: float, size: int) -> bytes:
    """A JSON object with msg_id and sent_ts, padded to `size` bytes when it is larger."""
    body = {"msg_id": msg_id, "sent_ts": sent_ts, "pad": ""}
    raw = json.dumps(body, separators=(",", ":"))
    if len(raw) < size:
        body["pad"] = "x" * (size - len(raw))
        raw = json.dumps(body, separators=(",", ":"))
    return raw.encode()


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

    def __init__(self, agent: PublisherHost) -> None:
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
                why = None if a.stop.is_set() else a.link_dead(self.link)  # a stop's interrupt
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
