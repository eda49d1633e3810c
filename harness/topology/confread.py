"""Reading a deployment's own activemq.xml files (`config:`): their properties, transport and
network connectors, and the protocols a group's members must offer. harness.topology.confcheck
checks them and harness.deploy.importconf rewrites them, both through these helpers, so a check
and its rewrite never disagree about what a URI means.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.topology.amqxml import PROPERTY, ConfFile, Node
from harness.topology.files import InputFileError, read_input
from harness.topology.model import Group

KNOWN_PROPS = ("activemq.base", "activemq.data", "activemq.conf", "activemq.home")
PLAIN = {"tcp": "openwire", "nio": "openwire", "auto": "openwire", "auto+nio": "openwire"}
PLAIN |= {"mqtt": "mqtt", "mqtt+nio": "mqtt", "stomp": "stomp", "stomp+nio": "stomp"}
TLS = ("ssl", "nio+ssl", "auto+ssl", "auto+nio+ssl", "mqtt+ssl", "mqtt+nio+ssl", "stomp+ssl", "stomp+nio+ssl")
UNAVAILABLE = ("amqp", "amqp+nio", "amqp+ssl", "amqp+nio+ssl", "ws", "wss", "http", "https", "udp")
ADDRESS = re.compile(r"(?P<scheme>[a-z][a-z0-9+]*)://(?P<host>[^:/?,()\s]+)(?::(?P<port>[^/?,()\s&]+))?")
CONNECTOR_URI = re.compile(
    r"^(?P<scheme>[a-z][a-z0-9+]*)://(?P<host>[^:/?]*)(?::(?P<port>[^/?]+))?(?P<rest>.*)$"
)
NETWORK_CONNECTORS = ("networkConnector", "multicastNetworkConnector", "ldapNetworkConnector")
STORES = ("kahaDB", "mKahaDB")


def member_files(group: Group) -> list[Path]:
    """The config file of each member, in member order."""
    c = group.config
    files = [c] * group.size if isinstance(c, str) else list(c or [])
    return [Path(f) for f in files]


def load_properties(conf: ConfFile) -> dict[str, str]:
    """Properties of the files a placeholder bean loads from next to the config (`${activemq.conf}`)."""
    props: dict[str, str] = {}
    text = conf.data.decode("utf-8", "replace")
    for m in re.finditer(r"\$\{activemq\.conf\}/([\w.-]+\.properties)", text):
        f = conf.path.parent / m.group(1)
        try:
            body = read_input(f).decode("utf-8", "replace") if f.is_file() else ""
        except InputFileError:
            body = ""
        for line in body.splitlines():
            line = line.strip()
            if line and not line.startswith(("#", "!")):
                k, _, v = line.partition("=") if "=" in line else line.partition(":")
                props[k.strip()] = v.strip()
    return props


def property_files(conf: ConfFile) -> list[Path]:
    text = conf.data.decode("utf-8", "replace")
    found = re.findall(r"\$\{activemq\.conf\}/([\w.-]+\.properties)", text)
    return [conf.path.parent / f for f in dict.fromkeys(found) if (conf.path.parent / f).is_file()]


def resolve(value: str, props: dict[str, str]) -> str:
    return PROPERTY.sub(lambda m: props.get(m.group(1), m.group(0)), value)


@dataclass
class Connector:
    node: Node
    name: str
    scheme: str
    host: str
    port: int | None
    rest: str
    protocol: str | None  # openwire/mqtt/stomp for what the harness can run and proxy


def connectors(conf: ConfFile, props: dict[str, str]) -> list[Connector]:
    out: list[Connector] = []
    broker = conf.broker
    for tc in broker.find("transportConnectors") if broker else []:
        for n in tc.find("transportConnector"):
            m = CONNECTOR_URI.match(resolve(n.attrs.get("uri", ""), props))
            if not m:
                out.append(Connector(n, n.attrs.get("name", ""), "", "", None, "", None))
                continue
            port = int(m["port"]) if (m["port"] or "").isdigit() else None
            scheme = m["scheme"]
            out.append(
                Connector(n, n.attrs.get("name", ""), scheme, m["host"], port, m["rest"], PLAIN.get(scheme))
            )
    return out


def network_connectors(conf: ConfFile) -> list[Node]:
    broker = conf.broker
    return [n for nc in (broker.find("networkConnectors") if broker else []) for n in nc.children]


def lookup(hosts: dict[str, str], host: str, port: str | None) -> str | None:
    """The member `hosts:` maps host:port (or host) to; host names compare case-insensitively."""
    folded = {k.lower(): v for k, v in hosts.items()}
    return folded.get(f"{host}:{port}".lower()) or folded.get(host.lower())


def file_protocols(conf: ConfFile) -> set[str]:
    return {c.protocol for c in connectors(conf, conf_props(conf)) if c.protocol}


def conf_props(conf: ConfFile) -> dict[str, str]:
    return {**{k: "${" + k + "}" for k in KNOWN_PROPS}, **load_properties(conf)}


def required_protocols(group: Group, confs: list[ConfFile]) -> tuple[set[str], bool]:
    """What the agents and the harness need from every member, and whether the topology said so."""
    if "connectors" in group.model_fields_set:
        return set(group.connectors), True
    found = set().union(*(file_protocols(c) for c in confs)) if confs else set()
    need = found | {"openwire"}
    if not need & {"mqtt", "stomp"}:
        need.add("mqtt")  # the topology default (mqtt, openwire): the agents speak MQTT
    return need, False
