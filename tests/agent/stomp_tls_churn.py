"""Open, use and close TLS STOMP links in a loop; run as a child process by test_tls.py.

Usage: python -m tests.agent.stomp_tls_churn URL CA_FILE COUNT. Prints `links N failed F` and
exits 0; a heap corruption in a close kills the process instead (SIGABRT or SIGSEGV).
"""

from __future__ import annotations

import os
import sys

from agent_under_test.config import BrokerUrl, parse_agent_conf
from agent_under_test.reference.transport import LinkError, make_transport


def main(url: str, ca: str, count: int) -> None:
    conf = parse_agent_conf(f"[agent]\nmb.urls={url}\nmb.ssl.ca={ca}\n")
    transport = make_transport("stomp", conf)
    broker = BrokerUrl.parse(url)
    failed = 0
    for i in range(count):
        link = None
        try:
            link = transport.connect(broker, f"churn-{i}", False, lambda topic, body: None, 5.0)
            link.subscribe("churn/#", 1, False, f"s{i}", 5.0)
            for k in range(5):  # deliveries and receipts in flight when the close comes
                link.publish("churn/x", b"x" * 100, 1, k)
        except LinkError:
            failed += 1
        if link is not None:
            link.close()
    print(f"links {count} failed {failed}", flush=True)
    # leave as the agent does (agent_under_test/reference/cli.py): a heart-beat thread of the last
    # link may still be alive, and finalization is not what this checks
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
