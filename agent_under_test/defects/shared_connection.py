"""Defect 8 — all subscriptions share one connection: one broken topic breaks all.

The subscriptions are made on a single connection (one client id). Whatever disturbs that
connection — a cut socket, a refused SUBSCRIBE on one topic, a kicked client id — disconnects every
subscription at once, and they fail over together instead of independently (the seed: "This logic
will separately execute for each topic subscription").

Caught by: cutting one subscriber connection at a time (Faults.sever): with the reference exactly
one role reconnects per cut; with this agent every subscription role logs `disconnected` for each
cut (and a refused subscription keeps all the others from ever being `subscribed`).
"""

from __future__ import annotations

import sys
import threading

from paho.mqtt.client import topic_matches_sub

from agent_under_test.config import BrokerUrl, Subscription
from agent_under_test.reference.agent import ReferenceAgent, Subscriber
from agent_under_test.reference.cli import main
from agent_under_test.reference.transport import Link, LinkError, OnMessage


class SharedSubscriber(Subscriber):
    def __init__(self, agent: ReferenceAgent, subs: list[Subscription]) -> None:
        self.a = agent
        self.subs = subs
        self.roles = [f"subscriber:{s.topic}" for s in subs]
        self.cid = agent.client_id("shared")
        self.modes = [agent.subscription_mode(s) for s in subs]
        self.durable = any(d for _q, d in self.modes)
        self.ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sub-shared", daemon=True)

    def _handler(self, url: BrokerUrl) -> OnMessage:
        per_sub = {s.topic: self.a.received_handler(s.topic, url) for s in self.subs}

        def handler(topic: str, payload: bytes) -> None:
            for flt, h in per_sub.items():
                if topic_matches_sub(flt, topic):
                    h(topic, payload)

        return handler

    def _log_all(self, event: str, broker: str, reason: str) -> None:
        for role in self.roles:
            self.a.log.write(event, broker=broker, role=role, reason=reason)

    def _connect(self, reason: str) -> tuple[Link | None, LinkError | None]:
        a = self.a
        last: LinkError | None = None
        for url in a.urls():
            if a.stop.is_set():
                break
            try:
                link = a.transport.connect(
                    url, self.cid, self.durable, self._handler(url), a.connect_timeout()
                )
            except LinkError as e:
                self._log_all("disconnected", url.key, f"connect_failed: {e}")
                last = e
                continue
            self._log_all("connected", link.broker, reason)
            return link, None
        return None, last

    def _run(self) -> None:
        a = self.a
        backoff = a.new_backoff()
        reason = "initial"
        while not a.stop.is_set():
            link, err = self._connect(reason)
            if link is None:
                a.stop.wait(a.retry_delay(backoff, err))
                continue
            reason = "reconnect"
            try:
                for i, (sub, (qos, durable)) in enumerate(zip(self.subs, self.modes, strict=True)):
                    link.subscribe(sub.topic, qos, durable, f"{self.cid}-s{i}", a.connect_timeout())
                    a.log.write("subscribed", topic=sub.topic, broker=link.broker, qos=qos, durable=durable)
            except LinkError as e:
                link.close()
                self._log_all("disconnected", link.broker, f"subscribe_failed: {e}")
                a.stop.wait(a.retry_delay(backoff, e))
                continue
            self.ready.set()
            backoff.reset()
            why = a.serve(link)
            link.close()
            self._log_all("disconnected", link.broker, why)
            if not a.stop.is_set():
                a.stop.wait(backoff.next())


class SharedConnectionAgent(ReferenceAgent):
    variant = "shared_connection"

    def make_subscribers(self) -> list[Subscriber]:
        if not self.wl.subscriptions:
            return []
        return [SharedSubscriber(self, list(self.wl.subscriptions))]


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.shared_connection", SharedConnectionAgent))
