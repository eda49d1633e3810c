"""Authentication and TLS against real brokers, through the fault proxy, with real clients.

`secure-pair`: users via simpleAuthenticationPlugin (no anonymous access), MQTT and STOMP over TLS
with certificates from the run's throwaway CA (`<run>/tls/ca.pem`).
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from stomp.exception import ConnectFailedException, StompException

from harness.run.env import Environment
from harness.topology import builtin_topology, loads_topology

from .support import Consumer, Producer, StompPeer, addr, env_up

pytestmark = [pytest.mark.broker, pytest.mark.security]


def _mqtt_connect(url: str, user: str, password: str, ca: Path | None) -> str:
    """Connect over TLS; return the CONNACK reason ("Success", ...) or the connection error."""
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"sec-{time.monotonic_ns()}")
    c.tls_set(ca_certs=str(ca) if ca else None, cert_reqs=ssl.CERT_REQUIRED)
    c.username_pw_set(user, password)
    done = threading.Event()
    result: dict[str, Any] = {}

    def on_connect(client: mqtt.Client, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        result["reason"] = str(reason)
        done.set()

    def on_disconnect(client: mqtt.Client, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        result.setdefault("reason", f"disconnected: {reason}")
        done.set()

    c.on_connect, c.on_disconnect = on_connect, on_disconnect
    host, port = addr(url)
    try:
        c.connect(host, port, keepalive=10)
    except (ssl.SSLError, OSError) as e:
        return f"{type(e).__name__}: {e}"
    c.loop_start()
    try:
        if not done.wait(15):
            return "timeout"
        return str(result["reason"])
    finally:
        c.disconnect()
        c.loop_stop()


def _handshake(url: str, cafile: Path) -> str:
    """A bare TLS handshake (hostname checked) with `cafile` as the only trust."""
    ctx = ssl.create_default_context(cafile=str(cafile))
    host, port = addr(url)
    try:
        with (
            socket.create_connection((host, port), timeout=10) as raw,
            ctx.wrap_socket(raw, server_hostname=host),
        ):
            return "ok"
    except ssl.SSLError as e:
        return f"{type(e).__name__}: {e}"


def _stomp_connect(url: str, user: str, password: str, ca: Path | None) -> str:
    peer = StompPeer([url], user, password, ca_file=ca)
    try:
        conn = peer.connect_once(url, timeout=10)
    except (ConnectFailedException, StompException, OSError, ssl.SSLError) as e:
        return f"refused: {type(e).__name__} {e} {peer.errors[-1:]}"
    conn.disconnect()
    return "connected"


def test_auth_and_tls_on_a_secure_pair(tmp_path: Path) -> None:
    with env_up(builtin_topology("secure-pair"), tmp_path / "run") as env:
        ca = env.plan.ca_file
        assert ca.exists()
        mqtt_url = env.mb_urls("mqtt", "pair")[0]
        stomp_url = env.mb_urls("stomp", "pair")[0]
        assert mqtt_url.startswith("ssl://") and stomp_url.startswith("ssl://")  # agent.conf contract

        # TLS with the run's CA and the right password: accepted.
        assert _mqtt_connect(mqtt_url, "agent", "agent-secret", ca) == "Success"
        assert _stomp_connect(stomp_url, "agent", "agent-secret", ca) == "connected"
        # Wrong password: rejected by the broker (over a verified TLS session).
        bad = _mqtt_connect(mqtt_url, "agent", "wrong", ca)
        assert bad != "Success" and ("Not authorized" in bad or "Bad user name or password" in bad), bad
        assert _stomp_connect(stomp_url, "agent", "wrong", ca).startswith("refused"), (
            "wrong STOMP password accepted"
        )
        assert _mqtt_connect(mqtt_url, "nobody", "agent-secret", ca) != "Success"
        # Without the run's CA (the system trust store only) the certificate does not verify.
        no_ca = _mqtt_connect(mqtt_url, "agent", "agent-secret", None)
        assert "CERTIFICATE_VERIFY_FAILED" in no_ca, no_ca
        system = Path(ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt")
        no_ca_stomp = _stomp_connect(stomp_url, "agent", "agent-secret", system)
        assert no_ca_stomp.startswith("refused"), no_ca_stomp
        for url in (mqtt_url, stomp_url):
            assert _handshake(url, ca) == "ok"
            assert "CERTIFICATE_VERIFY_FAILED" in _handshake(url, system)

        # Secrets stay out of the run record.
        record = (env.run_dir / "run.json").read_text()
        assert "agent-secret" not in record and "bridge-secret" not in record
        assert (env.plan.tls_dir / "password").read_text() not in record
        assert json.loads(record)["topology"]["users"][0]["password"] == "***"
        # Broker configs hold passwords: readable by the owner only.
        conf = env.plan.brokers["pair-1"].conf_dir / "activemq.xml"
        assert conf.stat().st_mode & 0o077 == 0


def test_bridges_authenticate_and_use_tls(tmp_path: Path) -> None:
    """Two brokers whose openwire (and so their bridge) is TLS-only and needs a login: a message
    crosses, so the bridge presented the bridge user's credentials and trusted the run's CA."""
    topo = loads_topology("""
name: secure-net
groups:
  - name: a
    kind: standalone
    connectors: {stomp: {tls: true}, openwire: {tls: true}}
  - name: b
    kind: standalone
    connectors: {stomp: {tls: true}, openwire: {tls: true}}
bridges:
  - {from: a, to: b, uri: static}
users:
  - {name: app, password: app-pw}
  - {name: net, password: net-pw, groups: [admins], bridge: true}
""")
    with env_up(topo, tmp_path / "run") as env:
        assert env.plan.bridges[0].uri.startswith("static:(ssl://")
        ca = env.plan.ca_file
        cons = Consumer(
            env.mb_urls("stomp", "b"), "/queue/sec", user="app", password="app-pw", ca_file=ca
        ).start()
        prod = Producer(env.mb_urls("stomp", "a"), "/queue/sec", user="app", password="app-pw", ca_file=ca)
        try:
            deadline = time.monotonic() + 60
            k = 0
            while time.monotonic() < deadline:
                prod.send(f"m{k}")
                if not cons.wait_for({f"m{k}"}, 3):
                    break
                k += 1
            else:
                pytest.fail("no message crossed the authenticated TLS bridge")
            log = env.backend.log_since("a-1")  # type: ignore[attr-defined]
            assert "(b-1) has been established" in log
        finally:
            cons.stop()
            prod.close()


def test_environment_record_keeps_tls_material_private(tmp_path: Path) -> None:
    with Environment.up(builtin_topology("secure-pair"), tmp_path / "run") as env:
        tls = env.plan.tls_dir
        assert (tls.stat().st_mode & 0o777) == 0o700
        for f in tls.iterdir():
            assert f.stat().st_mode & 0o077 == 0, f
