"""Defect 5 — reconnects in a tight loop, with no backoff, when credentials are rejected.

As in the real PCA: on a refused CONNECT it goes straight back to the first broker, never trying
the others and never pausing — hundreds of connection attempts a second per subscription.

Caught by: a wrong mb.password against brokers with authentication: the connection attempt rate
(per role, from the agent log or counted at the proxy) exceeds the bound the reference keeps
(at most len(mb.urls) attempts per backoff interval, a few per second).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from agent_under_test.config import BrokerUrl
from agent_under_test.reference.agent import Backoff, ReferenceAgent
from agent_under_test.reference.cli import main
from agent_under_test.reference.transport import Link, LinkError, OnMessage


class AuthTightLoopAgent(ReferenceAgent):
    variant = "auth_tight_loop"

    def connect_first_available(
        self,
        role: str,
        cid: str | None,
        durable: bool,
        on_message: Callable[[BrokerUrl], OnMessage] | None,
        reason: str,
    ) -> tuple[Link | None, LinkError | None]:
        last: LinkError | None = None
        for url in self.urls():
            if self.stop.is_set():
                break
            handler = on_message(url) if on_message is not None else None
            try:
                link = self.transport.connect(url, cid, durable, handler, self.connect_timeout())
            except LinkError as e:
                self.log.write("disconnected", broker=url.key, role=role, reason=f"connect_failed: {e}")
                if e.kind == "rejected":
                    return None, e  # back to the first broker, never the others
                last = e
                continue
            self.log.write("connected", broker=link.broker, role=role, reason=reason)
            return link, None
        return None, last

    def retry_delay(self, backoff: Backoff, error: LinkError | None) -> float:
        if error is not None and error.kind == "rejected":
            return 0.0
        return backoff.next()


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.auth_tight_loop", AuthTightLoopAgent))
