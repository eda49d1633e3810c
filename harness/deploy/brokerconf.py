"""Render each broker's activemq.xml and log4j.properties from a plan (Jinja2 templates).

A group's `xml_file` is rendered as a Jinja2 template with the same variables as the built-in
one (`broker`, `group`, `connectors`, `bridges`, `users`, `bridge_user`, `ssl`), so a whole
user-written activemq.xml can still name the ports and store the harness allocated. User
templates render sandboxed (no attribute access to Python internals, bounded output).
`check_rendered()` renders every broker as a run does and parses the result (`bfh topology
validate`, `bfh compose`), so a file a run could not start is refused before anything starts.
"""

from __future__ import annotations

import itertools
import re
import tempfile
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, PackageLoader, StrictUndefined, TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from harness.deploy.plan import HOST, BrokerPlan, Plan, connector_uri, make_plan
from harness.deploy.tls import load_run_tls
from harness.topology import Topology, TopologyError
from harness.topology.amqxml import ParseFailure, check_text

MAX_RENDERED = 16 << 20  # characters of one rendered user template

_jinja = Environment(
    loader=PackageLoader("harness", "templates"),
    undefined=StrictUndefined,
    keep_trailing_newline=True,
    autoescape=False,  # XML attributes are escaped explicitly with |e
)


class _Sandbox(ImmutableSandboxedEnvironment):
    """The sandbox, with `*` and `**` bounded (`'x' * 10**10` would take the machine's memory)."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "**" and isinstance(right, int) and abs(right) > 64:
            raise SecurityError("exponent above 64 in a template")
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > 1 << 20:
                    raise SecurityError("a repeated value longer than 1M in a template")
        return super().call_binop(context, operator, left, right)


def _render_user_template(path: Path, view: dict[str, Any]) -> str:
    """A group's xml_file rendered sandboxed; TopologyError (one line) when it cannot be."""
    env = _Sandbox(
        loader=FileSystemLoader(str(path.parent)),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    try:
        out: list[str] = []
        size = 0
        for piece in env.get_template(path.name).generate(**view):
            size += len(piece)
            if size > MAX_RENDERED:
                raise SecurityError(f"renders to more than {MAX_RENDERED >> 20} M characters")
            out.append(piece)
        return "".join(out)
    except (TemplateError, RecursionError, ValueError, TypeError, ArithmeticError) as e:
        why = str(e).strip().splitlines()[0].rstrip(".") if str(e).strip() else type(e).__name__
        raise TopologyError(
            f"{path}: the xml_file template does not render: {why}. Fix: use only the documented "
            "variables (broker, connectors, bridges, users, ...) and plain Jinja2 expressions"
        ) from None


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
            "uri": connector_uri(c, port, tls, group.connector(c)),
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

    def sub(m: re.Match[str]) -> str:  # per start tag: a one-line file keeps its bridges
        host = "0.0.0.0" if m[1] == "transportConnector" else bridge_host
        return m[0].replace(f"://{HOST}:", f"://{host}:")

    return re.sub(r"<(transportConnector|networkConnector)\b[^>]*>", sub, xml)


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
    if group.config:  # the deployment's own file, rewritten for the test (harness/deploy/importconf.py)
        from harness.deploy.importconf import render_member

        extra = render_member(plan, broker, paths)
        xml = extra.pop("activemq.xml")
    view = broker_view(plan, broker, paths, ssl)
    if group.config:
        pass
    elif group.xml_file:
        xml = _render_user_template(Path(group.xml_file), view)
    else:
        xml = _jinja.get_template("activemq.xml.j2").render(**view)
    log4j = _jinja.get_template("log4j.properties.j2").render(
        log_file=None if console_log else str(log_file or broker.log_file)
    )
    return {**extra, "activemq.xml": xml, "log4j.properties": log4j}


def check_well_formed(text: str, what: str) -> None:
    """TopologyError (one line) unless `text` is well-formed XML without a DOCTYPE."""
    try:
        check_text(text.encode("utf-8"))
    except ParseFailure as e:
        fix = e.fix or (
            "check the topology's xml_file/config file; `bfh topology show` prints what the harness "
            "made of it"
        )
        raise TopologyError(f"{what}: the rendered activemq.xml, line {e.line}: {e}. Fix: {fix}") from None


def check_rendered(topology: Topology) -> None:
    """Render every broker's files as a run does, in a scratch folder (ports from a fixed range,
    placeholder TLS paths), and parse each activemq.xml: TopologyError when a run's would fail."""
    ssl = {"keystore": "/nonexistent/keystore.p12", "truststore": "/nonexistent/ts.p12", "password": "x"}
    with tempfile.TemporaryDirectory(prefix="bfh-render-") as tmp:
        plan = make_plan(topology, tmp, port_pool=itertools.count(20000))
        for b in plan.brokers.values():
            text = render_broker(plan, b, ssl=ssl)["activemq.xml"]
            check_well_formed(text, f"{topology.name}: broker {b.name}")
