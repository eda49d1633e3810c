"""ActiveMQ knowledge the topology needs: the children <broker> accepts, the elements the harness
generates itself, the networkConnector attributes a bridge may set (all of 5.17.2's schema), and
where ActiveMQ is installed."""

from __future__ import annotations

import difflib
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path

DEBIAN_HOME = Path("/usr/share/activemq")

# activemq.xml elements the harness writes itself: a fragment must not repeat them.
GENERATED_ELEMENTS = (
    "networkConnectors",
    "persistenceAdapter",
    "plugins",
    "sslContext",
    "transportConnectors",
)
AMQ_NS = "http://activemq.apache.org/schema/core"
# Children <broker> accepts (activemq-core.xsd of 5.17.2; any order).
BROKER_CHILDREN = (
    "adminView",
    "brokerContext",
    "brokerObjectName",
    "consumerSystemUsage",
    "dataDirectoryFile",
    "destinationFactory",
    "destinationInterceptors",
    "destinationPolicy",
    "destinations",
    "ioExceptionHandler",
    "jmsBridgeConnectors",
    "jobSchedulerStore",
    "managementContext",
    "messageAuthorizationPolicy",
    "networkConnectorURIs",
    "networkConnectors",
    "persistenceAdapter",
    "persistenceFactory",
    "persistenceTaskRunnerFactory",
    "plugins",
    "producerSystemUsage",
    "proxyConnectors",
    "regionBroker",
    "schedulerDirectoryFile",
    "services",
    "shutdownHooks",
    "sslContext",
    "startException",
    "systemUsage",
    "taskRunnerFactory",
    "tempDataStore",
    "tmpDataDirectory",
    "transportConnectorURIs",
    "transportConnectors",
    "vmConnectorURI",
)

# networkConnector attributes a bridge may set through `attributes:` (NetworkBridgeConfiguration
# setters of 5.17.2 with scalar values; the ones the model generates itself are left out).
BRIDGE_ATTRIBUTES = (
    "advisoryAckPercentage", "advisoryForFailedForward", "advisoryPrefetchSize", "alwaysSyncSend",
    "bridgeTempDestinations", "checkDuplicateMessagesOnDuplex", "clientIdToken",
    "conduitNetworkQueueSubscriptions", "consumerPriorityBase", "consumerTTL", "destinationFilter",
    "dispatchAsync", "dynamicOnly", "gcDestinationViews", "gcSweepTime", "messageTTL", "prefetchSize",
    "remotePassword", "remoteUserName", "staticBridge", "suppressDuplicateQueueSubscriptions",
    "suppressDuplicateTopicSubscriptions", "syncDurableSubs", "useBrokerNameAsIdSees", "useCompression",
    "useVirtualDestSubs",
)  # fmt: skip


# A connector's limits (docs/topology.md, "Connectors for a storm").
MAX_CONNECTIONS = 1_000_000  # maximumConnections above it is a typo
MIN_FRAME, MAX_FRAME = 1024, 2**31 - 1  # wireFormat.maxFrameSize: a Java int; below 1 KB nothing fits

# `transport.<key>` options of a broker's transportConnector URI: applied to each accepted
# connection. The TCP transport reference's options (NIO takes the same), then MQTT's and
# STOMP's own transport options (their protocol pages). ActiveMQ refuses to start a connector
# with an option its transport has no setter for, so an unknown key is stopped here, with its line.
TRANSPORT_OPTIONS = (
    "backlog", "closeAsync", "connectionTimeout", "daemon", "diffServ", "dynamicManagement",
    "ioBufferSize", "keepAlive", "logWriterName", "minmumWireFormatVersion", "socketBufferSize",
    "soLinger", "soTimeout", "soWriteTimeout", "startLogging", "tcpNoDelay", "threadName", "trace",
    "trafficClass", "typeOfService", "useInactivityMonitor", "useKeepAlive", "useLocalHost",
    # MQTT (mqtt, mqtt+nio)
    "defaultKeepAlive", "activeMQSubscriptionPrefetch", "publishDollarTopics", "subscriptionStrategy",
    # STOMP (stomp, stomp+nio)
    "defaultHeartBeat", "hbGracePeriodMultiplier",
)  # fmt: skip
#: MQTT's subscription strategies (activemq-mqtt's strategy factories): a durable subscription is a
#: durable topic subscription (default) or a virtual topic's queue of its own (docs/topology.md)
SUBSCRIPTION_STRATEGIES = ("mqtt-default-subscriptions", "mqtt-virtual-topic-subscriptions")
_URI_VALUE = re.compile(r"^[A-Za-z0-9._:,/+-]{1,200}$")


def check_transport_options(options: Mapping[str, object]) -> list[tuple[str, str, str]]:
    """(key, problem, fix) for each `transport:` option a connector URI cannot carry."""
    out = []
    for k, v in options.items():
        if k.startswith("transport."):
            out.append((k, f"write {k!r} without its 'transport.' prefix", f"use {k[10:]!r}"))
        elif k in ("maximumConnections", "wireFormat.maxFrameSize"):
            own = "maximum_connections" if k == "maximumConnections" else "max_frame_size"
            out.append((k, f"{k!r} is not a transport option", f"set the connector's {own}"))
        elif k not in TRANSPORT_OPTIONS:
            close = difflib.get_close_matches(k, TRANSPORT_OPTIONS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            out.append((k, f"{k!r} is not a transport option ActiveMQ knows", hint + "see docs/topology.md"))
        elif k == "subscriptionStrategy" and v not in SUBSCRIPTION_STRATEGIES:
            strategies = ", ".join(SUBSCRIPTION_STRATEGIES)
            out.append((k, f"{v!r} is not an MQTT subscription strategy", f"use one of {strategies}"))
        elif isinstance(v, str) and not _URI_VALUE.match(v):
            out.append((k, f"{v!r} cannot be written into a URI", "use letters, digits and . _ : , / + -"))
        elif isinstance(v, int) and not isinstance(v, bool) and not 0 <= v <= 2**31 - 1:
            out.append((k, f"{v} is out of range", "give a value from 0 to 2147483647"))
    return out


def activemq_home() -> Path:
    """ActiveMQ's installation (``ACTIVEMQ_HOME``, default Debian's)."""
    return Path(os.environ.get("ACTIVEMQ_HOME") or DEBIAN_HOME)


def check_fragment(fragment: str) -> list[tuple[str, str]]:
    """Problems of a user's activemq.xml fragment (well-formed, no generated elements)."""
    try:
        root = ET.fromstring(f'<broker xmlns="{AMQ_NS}">{fragment}</broker>')
    except ET.ParseError as e:
        line, col = e.position
        return [
            (
                f"not well-formed XML (fragment line {line}, column {col}: {str(e).split(':')[0]})",
                "close every element and escape & and < as &amp; and &lt;",
            )
        ]
    out = []
    for child in root:
        ns, _, local = child.tag.rpartition("}")
        if ns.lstrip("{") == AMQ_NS and local not in BROKER_CHILDREN:
            close = difflib.get_close_matches(local, BROKER_CHILDREN, n=1)
            out.append(
                (
                    f"<{local}> is not an element <broker> accepts",
                    (f"did you mean <{close[0]}>? " if close else "")
                    + "use a child element of <broker> from activemq-core.xsd (e.g. destinationPolicy, "
                    "systemUsage, services)",
                )
            )
        elif local in GENERATED_ELEMENTS:
            out.append(
                (
                    f"<{local}> is generated by the harness (from connectors, bridges, users, tls)",
                    "express it in the topology, or use xml_file for a whole activemq.xml",
                )
            )
    return out
