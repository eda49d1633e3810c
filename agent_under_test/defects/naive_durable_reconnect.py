"""Defect 12 — reconnects durable MQTT clients naively: no probe with a throwaway clean-session id
before a durable CONNECT, no settle after a broker was unresponsive.

A CONNECT sent to a paused (SIGSTOPped) master is replayed when it thaws; ActiveMQ steals the link
for each replay of the durable client id and can leave the live connection's granted subscription
with no consumer (docs/scenarios.md, the paused-master finding). The reference agent avoids it with
`MqttTransport._probe`.

Caught by: `pause-master`: lost deliveries blamed on the broker with the `Stealing link` evidence
(harness.verdict.blame), the `broker_consumers` finding.
"""

from __future__ import annotations

import sys
from pathlib import Path

from agent_under_test.config import AgentConf, BrokerUrl, Workload
from agent_under_test.reference.agent import ReferenceAgent
from agent_under_test.reference.cli import main
from agent_under_test.reference.transport import MqttTransport


class NaiveMqttTransport(MqttTransport):
    def _probe(self, url: BrokerUrl, client_id: str, timeout: float | None) -> None:
        return  # the durable client id goes straight to whatever broker answers the TCP connect


class NaiveDurableReconnectAgent(ReferenceAgent):
    variant = "naive_durable_reconnect"

    def __init__(self, conf: AgentConf, workload: Workload, log_path: str | Path) -> None:
        super().__init__(conf, workload, log_path)
        if isinstance(self.transport, MqttTransport):
            self.transport = NaiveMqttTransport(conf, self.keepalive(), self.liveness_timeout())


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.naive_durable_reconnect", NaiveDurableReconnectAgent))
