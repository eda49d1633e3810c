"""Docker Compose files generated from a topology (`bfh compose TOPOLOGY`).

The plan is the one every backend uses (`make_plan`), with ports from fixed ranges instead of
free loopback ports: the fault proxy (service `toxiproxy`) listens at 21000+ for client links
(published on 127.0.0.1) and at 22000+ for bridge links (container network only). Inside its
container each broker keeps the default connector ports; a group's members share a named volume
for KahaDB. Broker configs are rendered by brokerconf, exactly as for the other backends.

Output: `<out>/<name>.yml` and `<out>/conf/<name>/` (proxies.json, one conf dir per broker).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from harness.backends.brokerfiles import activemq_command
from harness.deploy.brokerconf import check_well_formed, for_container, render_broker
from harness.deploy.plan import Link, Plan, make_plan
from harness.topology import Topology

ACTIVEMQ_IMAGE = "${ACTIVEMQ_IMAGE:-bfh-activemq:5.17.2}"
TOXIPROXY_IMAGE = "${TOXIPROXY_IMAGE:-bfh-faultproxy:0.1.0}"
PROXY_HOST = "toxiproxy"
API_PORT = 8474
CLIENT_BASE = 21000
BRIDGE_BASE = 22000
CONTAINER_PORTS = {"mqtt": 1883, "stomp": 61613, "openwire": 61616}


class ComposeError(ValueError):
    """A topology this generator cannot express; nothing was written."""


def _check(topology: Topology) -> None:
    if topology.uses_tls:
        raise ComposeError(
            f"{topology.name}: TLS connectors need per-run key material; "
            "use `--backend docker`, which makes it, instead of a static compose file"
        )
    if topology.uses_multicast:
        raise ComposeError(f"{topology.name}: multicast discovery bridges are not supported in compose files")
    if any(s.port for g in topology.groups for s in g.connectors.values()):
        raise ComposeError(f"{topology.name}: fixed connector ports are not supported in compose files")


def n_client_ports(topology: Topology) -> int:
    """How many client ports the proxy publishes (one per connector of every member)."""
    return sum(len(g.connectors) * g.size for g in topology.groups)


def compose_plan(topology: Topology, client_ports: Sequence[int] | None = None) -> Plan:
    """The topology's plan with compose ports: default connector ports inside each container,
    client links at `client_ports` (default CLIENT_BASE, CLIENT_BASE+1, ...) and bridge links
    from BRIDGE_BASE on the proxy."""
    _check(topology)
    n_conn = n_client_ports(topology)
    if client_ports is None:
        client_ports = range(CLIENT_BASE, CLIENT_BASE + n_conn)
    if len(client_ports) != n_conn or len(set(client_ports)) != n_conn:
        raise ComposeError(f"{topology.name}: needs {n_conn} distinct client ports, got {list(client_ports)}")
    bad = [p for p in client_ports if isinstance(p, bool) or not 1 <= p <= 65535]
    if bad:
        raise ComposeError(
            f"{topology.name}: client ports {bad[0]}..{bad[-1]} are outside 1..65535 "
            f"(it needs {n_conn} from the first); choose a lower --client-port"
        )
    # make_plan draws connector ports first, then client links, then bridge links
    pool = itertools.chain(
        range(1, n_conn + 1),  # placeholders, replaced by the defaults below
        client_ports,
        itertools.count(BRIDGE_BASE),
    )
    plan = make_plan(topology, Path("/data"), port_pool=pool)
    brokers = {
        name: dataclasses.replace(b, ports={c: CONTAINER_PORTS[c] for c in b.ports})
        for name, b in plan.brokers.items()
    }
    links = [dataclasses.replace(lk, upstream_port=CONTAINER_PORTS[lk.connector]) for lk in plan.links]
    return dataclasses.replace(plan, brokers=brokers, links=links)


def _proxies(plan: Plan) -> list[dict[str, Any]]:
    return [
        {
            "name": lk.name,
            "listen": f"0.0.0.0:{lk.listen_port}",
            "upstream": f"{lk.broker}:{lk.upstream_port}",
            "enabled": True,
        }
        for lk in plan.links
    ]


def _broker_service(name: str, group: str, conf: str) -> dict[str, Any]:
    return {
        "image": ACTIVEMQ_IMAGE,
        "command": activemq_command(
            "java", Path("/usr/share/activemq"), Path("/conf"), Path("/data"), Path("/data"), 256
        ),
        "hostname": name,
        "volumes": [f"{conf}:/conf:ro", f"{group}-store:/store"],
        # healthy = serving; a slave waits for the store lock and stays unhealthy
        "healthcheck": {
            "test": ["CMD", "bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{CONTAINER_PORTS['openwire']}"],
            "interval": "2s",
            "timeout": "2s",
            "retries": 60,
        },
    }


def render(
    topology: Topology, client_ports: Sequence[int] | None = None, api_port: int = API_PORT
) -> dict[str, str]:
    """{relative path: text} of the compose file and its conf dir (nothing written)."""
    if isinstance(api_port, bool) or not 1 <= api_port <= 65535:
        raise ComposeError(f"API port {api_port} is outside 1..65535")
    plan = compose_plan(topology, client_ports)
    if plan.links and max(lk.listen_port for lk in plan.links) > 65535:
        raise ComposeError(f"{topology.name}: too many links for the proxy's port range")
    name = topology.name
    files: dict[str, str] = {}
    services: dict[str, Any] = {}
    for b in plan.brokers.values():
        conf = f"conf/{name}/{b.name}"
        rendered = render_broker(
            plan, b, console_log=True, paths={"data_dir": "/data", "store_dir": "/store/kahadb"}
        )
        files[f"{conf}/activemq.xml"] = for_container(rendered["activemq.xml"], PROXY_HOST)
        check_well_formed(files[f"{conf}/activemq.xml"], f"{name}: broker {b.name}")
        files[f"{conf}/log4j.properties"] = rendered["log4j.properties"]
        services[b.name] = _broker_service(b.name, b.group, f"./{conf}")
    files[f"conf/{name}/proxies.json"] = json.dumps(_proxies(plan), indent=2) + "\n"
    client_links: list[Link] = [lk for lk in plan.links if lk.kind == "client"]
    services[PROXY_HOST] = {
        "image": TOXIPROXY_IMAGE,
        "command": ["-host", "0.0.0.0", "-port", str(api_port), "-config", "/conf/proxies.json"],
        "volumes": [f"./conf/{name}:/conf:ro"],
        "ports": [f"127.0.0.1:{p}:{p}" for p in [api_port, *(lk.listen_port for lk in client_links)]],
    }
    doc = {"services": services, "volumes": {f"{g.name}-store": {} for g in topology.groups}}
    urls = {
        f"{c}, group {g.name}": ",".join(plan.client_urls(c, g.name))
        for g in topology.groups
        for c in ("mqtt", "stomp")
        if c in g.connectors
    }
    header = [
        f"# {name}: generated by `bfh compose {name}` from the topology file; do not edit by hand.",
        f"# Run: docker compose -f {name}.yml up   (or docker-compose). Proxy API: 127.0.0.1:{api_port}",
        "# Images: ACTIVEMQ_IMAGE / TOXIPROXY_IMAGE (default: ours, from `bfh images build`).",
        *(f"# mb.urls ({c}) = {u}" for c, u in urls.items()),
    ]
    body = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=1000)
    files[f"{name}.yml"] = "\n".join(header) + "\n" + body
    return files


def write(
    topology: Topology, out_dir: Path, client_ports: Sequence[int] | None = None, api_port: int = API_PORT
) -> list[Path]:
    """Render, then write every file under `out_dir` (its conf/<name>/ is replaced whole)."""
    files = render(topology, client_ports, api_port)  # raises before anything is written
    shutil.rmtree(out_dir / "conf" / topology.name, ignore_errors=True)
    written = []
    for rel, text in sorted(files.items()):
        path = out_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def compose_command() -> list[str] | None:
    """The machine's Compose: the `docker compose` plugin, else `docker-compose`; None if neither."""
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
        if probe.returncode == 0:
            return ["docker", "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None
