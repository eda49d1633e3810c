"""Render each broker's activemq.xml and log4j.properties from a plan (Jinja2 templates).

A group's `xml_file` is rendered as a Jinja2 template with the same variables as the built-in
one (`broker`, `group`, `connectors`, `bridges`, `users`, `bridge_user`, `ssl`), so a whole
user-written activemq.xml can still name the ports and store the harness allocated.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, PackageLoader, StrictUndefined

from harness.plan import HOST, BrokerPlan, Plan, connector_uri
from harness.tls import load_run_tls

_jinja = Environment(
    loader=PackageLoader("harness", "templates"),
    undefined=StrictUndefined,
    keep_trailing_newline=True,
    autoescape=False,  # XML attributes are escaped explicitly with |e
)


def needs_tls(plan: Plan, broker: BrokerPlan) -> bool:
    """Whether `broker` serves a TLS connector or bridges to a TLS openwire connector."""
    group = plan.topology.group(broker.group)
    if any(spec.tls for spec in group.connectors.values()):
        return True
    return any(b.source_broker == broker.name and "ssl://" in b.uri for b in plan.bridges) or any(
        b.source_broker == broker.name
        and b.spec.uri == "multicast"
        and plan.topology.group(b.target_group).connectors["openwire"].tls
        for b in plan.bridges
    )


def broker_view(
    plan: Plan, broker: BrokerPlan, paths: dict[str, str] | None = None, ssl: dict[str, str] | None = None
) -> dict[str, Any]:
    """The template variables of one broker."""
    group = plan.topology.group(broker.group)
    paths = paths or {}
    view: dict[str, Any] = {
        "name": broker.name,
        "data_dir": paths.get("data_dir", str(broker.data_dir)),
        "store_dir": paths.get("store_dir", str(broker.store_dir)),
        "ports": dict(broker.ports),
    }
    advertised = plan.discovery_link(broker.name)
    connectors = []
    for c, port in broker.ports.items():
        tls = group.connector(c).tls
        entry: dict[str, Any] = {
            "name": c,
            "port": port,
            "uri": connector_uri(c, port, tls),
            "tls": tls,
            "discovery_uri": None,
            "published_port": None,
        }
        if c == "openwire" and advertised is not None and plan.multicast is not None:
            entry["discovery_uri"] = plan.multicast.uri(group.name)
            entry["published_port"] = advertised.listen_port
        connectors.append(entry)
    if broker.witness_port:  # the witness's direct connector: plain openwire, no proxy, no link
        connectors.append(
            {
                "name": "bfh-witness",
                "port": broker.witness_port,
                "uri": f"tcp://{HOST}:{broker.witness_port}",
                "tls": False,
                "discovery_uri": None,
                "published_port": None,
            }
        )
    if ssl is None and needs_tls(plan, broker):
        ssl = load_run_tls(plan.tls_dir).ssl_view(broker.name)
    bridges = [
        {**b.spec.model_dump(), "name": b.name, "uri": b.uri}
        for b in plan.bridges
        if b.source_broker == broker.name
    ]
    return {
        "broker": view,
        "group": group,
        "connectors": connectors,
        "bridges": bridges,
        "users": plan.topology.users,
        "bridge_user": plan.bridge_user,
        "ssl": ssl,
        "xml_fragment": group.xml_fragment,
    }


def for_container(xml: str, bridge_host: str) -> str:
    """An activemq.xml made for a container: connectors listen on every interface (published
    ports arrive on the container's own address) and bridges dial `bridge_host`, where the
    fault proxy's bridge links are reachable from the container network."""
    lines = []
    for line in xml.splitlines(keepends=True):
        if "<transportConnector " in line:
            line = line.replace(f"://{HOST}:", "://0.0.0.0:")
        elif "<networkConnector " in line:
            line = line.replace(f"://{HOST}:", f"://{bridge_host}:")
        lines.append(line)
    return "".join(lines)


def render_broker(
    plan: Plan,
    broker: BrokerPlan,
    *,
    log_file: Path | None = None,
    console_log: bool = False,
    paths: dict[str, str] | None = None,
    ssl: dict[str, str] | None = None,
) -> dict[str, str]:
    """Return {filename: text} for a broker's conf dir.

    `paths` overrides the data/store directories as seen by the broker (a container sees other
    paths than the host); `ssl` names keystore/truststore/password when TLS connectors exist
    (default: the run's material under `plan.tls_dir`, which the backend creates first).
    `console_log` logs to stdout instead of a file (`docker compose logs`).
    """
    group = plan.topology.group(broker.group)
    extra: dict[str, str] = {}
    if group.config:  # the deployment's own file, rewritten for the test (harness/importconf.py)
        from harness.importconf import render_member

        extra = render_member(plan, broker, paths)
        xml = extra.pop("activemq.xml")
    view = broker_view(plan, broker, paths, ssl)
    if group.config:
        pass
    elif group.xml_file:
        path = Path(group.xml_file)
        env = Environment(
            loader=FileSystemLoader(str(path.parent)),
            undefined=StrictUndefined,
            keep_trailing_newline=True,
            autoescape=False,
        )
        xml = env.get_template(path.name).render(**view)
    else:
        xml = _jinja.get_template("activemq.xml.j2").render(**view)
    log4j = _jinja.get_template("log4j.properties.j2").render(
        log_file=None if console_log else str(log_file or broker.log_file)
    )
    return {**extra, "activemq.xml": xml, "log4j.properties": log4j}
