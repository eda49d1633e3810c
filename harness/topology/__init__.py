"""The topology: what the user deploys (broker groups, connectors, bridges, users, TLS, their own
activemq.xml files), validated, with every problem reported as `file:line: ... Fix: ...`.

- model: the pydantic model and its checks
- activemq: ActiveMQ schema knowledge (children of <broker>, bridge attributes, installation)
- loader: YAML with line numbers, the built-in topologies
- amqxml, confcheck, imported: a deployment's own activemq.xml (`config:`): parsed with line
  numbers, checked statically, its connectors and bridges taken into the topology

The public names are re-exported here; callers import from `harness.topology`.
"""

from harness.topology.activemq import (
    AMQ_NS,
    BRIDGE_ATTRIBUTES,
    BROKER_CHILDREN,
    GENERATED_ELEMENTS,
    activemq_home,
    check_fragment,
)
from harness.topology.loader import (
    builtin_names,
    builtin_path,
    builtin_topology,
    load_topology,
    loads_topology,
    parse_topology,
)
from harness.topology.model import (
    CLIENT_CONNECTORS,
    GROUP_SIZES,
    NAME_PATTERN,
    Bridge,
    BridgeUri,
    Connector,
    ConnectorSpec,
    Group,
    GroupKind,
    Loc,
    Name,
    PathSpec,
    Problem,
    Strict,
    Topology,
    TopologyError,
    User,
    bridge_sources,
    bridge_targets,
    dotted,
)

__all__ = [
    "AMQ_NS",
    "BRIDGE_ATTRIBUTES",
    "BROKER_CHILDREN",
    "CLIENT_CONNECTORS",
    "GENERATED_ELEMENTS",
    "GROUP_SIZES",
    "NAME_PATTERN",
    "Bridge",
    "BridgeUri",
    "Connector",
    "ConnectorSpec",
    "Group",
    "GroupKind",
    "Loc",
    "Name",
    "PathSpec",
    "Problem",
    "Strict",
    "Topology",
    "TopologyError",
    "User",
    "activemq_home",
    "bridge_sources",
    "bridge_targets",
    "builtin_names",
    "builtin_path",
    "builtin_topology",
    "check_fragment",
    "dotted",
    "load_topology",
    "loads_topology",
    "parse_topology",
]
