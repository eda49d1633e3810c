"""Defect 6 — no connect timeout (stalls on a black-holed broker).

TCP connect and the wait for CONNACK/CONNECTED have no bound, as with paho 1.x in the PCA. paho
also treats the keepalive as a CONNACK bound, so this agent uses the PCA's keepalive of 60 s (and
the liveness window that goes with it): a broker that accepts TCP but never answers holds a
(re)connect for a minute or more instead of 2 s.

Caught by: a black-holed first URL (a proxy that accepts and drops every byte) ahead of a serving
broker, or a partition of the master's link healed after a while: the reference is connected to
the next URL within the connect timeout (2 s); this agent stalls on the black hole for ≥ 60 s.
"""

from __future__ import annotations

import sys

from agent_under_test.reference.agent import ReferenceAgent
from agent_under_test.reference.cli import main

PCA_KEEPALIVE_S = 60


class NoConnectTimeoutAgent(ReferenceAgent):
    variant = "no_connect_timeout"

    def connect_timeout(self) -> float | None:
        return None

    def keepalive(self) -> int:
        return PCA_KEEPALIVE_S

    def liveness_timeout(self) -> float:
        return 1.5 * PCA_KEEPALIVE_S + 0.5


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.no_connect_timeout", NoConnectTimeoutAgent))
