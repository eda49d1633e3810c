"""A broker's transportConnector URI (harness/templates/activemq.xml.j2): its scheme (TLS, NIO)
and the connection limits a topology connector sets (docs/topology.md, "Connectors for a
storm"). The plan (harness/deploy/plan.py) keeps `connector_uri` importable under its name."""

from __future__ import annotations

from harness.topology import ConnectorSpec

HOST = "127.0.0.1"
_SCHEMES = {"openwire": "tcp", "mqtt": "mqtt", "stomp": "stomp"}
_TLS_SCHEMES = {"openwire": "ssl", "mqtt": "mqtt+ssl", "stomp": "stomp+ssl"}


def connector_uri(connector: str, port: int, tls: bool = False, spec: ConnectorSpec | None = None) -> str:
    """A transportConnector URI; `spec` adds NIO (`mqtt+nio`, `nio`, `stomp+nio`, `+ssl` after it)
    and the connection limits (maximumConnections, wireFormat.maxFrameSize, transport.*)."""
    scheme = (_TLS_SCHEMES if tls else _SCHEMES)[connector]
    # MQTT/STOMP connectors: no inactivity monitor games; the agents' own keepalives apply.
    if spec is None:
        return f"{scheme}://{HOST}:{port}"
    if spec.nio:
        scheme = {"tcp": "nio", "ssl": "nio+ssl"}.get(scheme) or scheme.replace("+ssl", "") + "+nio" + (
            "+ssl" if tls else ""
        )
    opts: list[tuple[str, object]] = []
    if spec.maximum_connections is not None:
        opts.append(("maximumConnections", spec.maximum_connections))
    if spec.max_frame_size is not None:
        opts.append(("wireFormat.maxFrameSize", spec.max_frame_size))
    for k, v in spec.transport.items():
        opts.append((f"transport.{k}", str(v).lower() if isinstance(v, bool) else v))
    query = "&".join(f"{k}={v}" for k, v in opts)
    return f"{scheme}://{HOST}:{port}" + (f"?{query}" if query else "")
