"""The combined-defect agent: several documented Stratos PCA defects at once, as an agent nobody
here wrote might have them — QoS 0 with clean sessions, the publisher timeout in the wrong unit
(× 1000), no connect timeout, heartbeat-driven liveness, and `subscribed` before the broker
confirmed. The suite must name each of these broken promises (scenarios/test_verdict_power.py).

Caught by: `ordering` (connect_timeout), `both-down-long` (publisher_timeout), `blackhole-master`
(liveness), and any entry (no_downgrade, subscription_confirmed).
"""

from __future__ import annotations

import sys

from agent_under_test.defects.heartbeat_liveness import HeartbeatLivenessAgent
from agent_under_test.defects.no_connect_timeout import NoConnectTimeoutAgent
from agent_under_test.defects.publisher_timeout_x1000 import PublisherTimeoutX1000Agent
from agent_under_test.defects.qos0_clean_session import Qos0CleanSessionAgent
from agent_under_test.defects.subscribed_early import SubscribedEarlyAgent
from agent_under_test.reference.cli import main


class CombinedDefectAgent(
    SubscribedEarlyAgent,
    NoConnectTimeoutAgent,
    HeartbeatLivenessAgent,
    PublisherTimeoutX1000Agent,
    Qos0CleanSessionAgent,
):
    """No connect timeout with the PCA's 60 s keepalive (paho waits that long for CONNACK), and
    silence checked only on the heartbeat defect's 5 s beat."""

    variant = "combined"


if __name__ == "__main__":
    sys.exit(main("agent_under_test.defects.combined", CombinedDefectAgent))
