"""Real ActiveMQ brokers for the predictor's differential tests: every group of a small network one
standalone broker (persistent="false"), all of them in one JVM from one xbean file (one start of
about 5 s instead of one per broker), bridged over real TCP networkConnectors; then MQTT traffic
per family and what each consumer group received.

A networkConnector is written as the harness writes it (harness/templates/activemq.xml.j2: the
same attributes in the same order) or, for imported-config cases, as raw XML with `{port:<group>}`
for a group's openwire port.
"""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import paho.mqtt.client as mqtt

from harness.backends.brokerfiles import EXTRA_JARS, JAVA_LIBS, java_bin
from harness.deploy.brokerconf import _jinja
from harness.topology import Topology, activemq_home

ESTABLISHED = re.compile(r"Network connection between \S+ and \S+ \((\S+)\) has been established")


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def connectors_of(t: Topology) -> dict[str, list[str]]:
    """Each group's networkConnectors as the harness's own template writes them
    (harness/templates/activemq.xml.j2), each a `static:` URI to the target's broker."""
    out: dict[str, list[str]] = {}
    for g in t.groups:
        bridges = [
            {
                **b.model_dump(),
                "name": f"{b.source}-{b.name or f'nc{i}'}",  # a connector's name is its bean id
                "uri": f"static:(tcp://127.0.0.1:{{port:{b.target}}})",
            }
            for i, b in enumerate(t.bridges)
            if b.source == g.name
        ]
        view = {"name": g.name, "data_dir": "/x", "store_dir": "/x", "ports": {}}
        xml = _jinja.get_template("activemq.xml.j2").render(
            broker=view,
            group=g,
            connectors=[],
            bridges=bridges,
            users=[],
            bridge_user=None,
            ssl=None,
            xml_fragment=None,
        )
        out[g.name] = re.findall(
            r"<networkConnector\b[^>]*/>|<networkConnector\b[^>]*[^/]>.*?</networkConnector>", xml, flags=re.S
        )
    return out


@dataclass
class Network:
    """The running JVM and each group's ports."""

    proc: subprocess.Popen[bytes]
    log: Path
    openwire: dict[str, int]
    mqtt: dict[str, int]
    connectors: int

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


def _beans(groups: Sequence[str], ncs: dict[str, list[str]], ow: dict[str, int], mq: dict[str, int]) -> str:
    brokers = []
    for g in groups:
        xs = [re.sub(r"\{port:([a-z0-9-]+)\}", lambda m: str(ow[str(m.group(1))]), x) for x in ncs.get(g, [])]
        nc = f"<networkConnectors>{''.join(xs)}</networkConnectors>" if xs else ""
        brokers.append(
            f'<broker xmlns="http://activemq.apache.org/schema/core" brokerName="{g}" useJmx="false" '
            f'persistent="false" schedulePeriodForDestinationPurge="0" networkConnectorStartAsync="true">'
            f"{nc}<transportConnectors>"
            f'<transportConnector name="openwire-{g}" uri="tcp://127.0.0.1:{ow[g]}"/>'
            f'<transportConnector name="mqtt-{g}" uri="mqtt://127.0.0.1:{mq[g]}"/>'
            "</transportConnectors></broker>"
        )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<beans xmlns="http://www.springframework.org/schema/beans" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        'xsi:schemaLocation="http://www.springframework.org/schema/beans '
        "http://www.springframework.org/schema/beans/spring-beans.xsd "
        'http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">'
        + "\n".join(brokers)
        + "</beans>\n"
    )


@contextlib.contextmanager
def network(groups: Sequence[str], ncs: dict[str, list[str]], work: Path) -> Iterator[Network]:
    """Start every group's broker in one JVM; wait for the MQTT ports and every networkConnector's
    bridge; stop the JVM on exit."""
    work.mkdir(parents=True, exist_ok=True)
    ports = free_ports(2 * len(groups))
    ow = dict(zip(groups, ports[: len(groups)], strict=True))
    mq = dict(zip(groups, ports[len(groups) :], strict=True))
    (work / "activemq.xml").write_text(_beans(groups, ncs, ow, mq), encoding="utf-8")
    (work / "log4j.properties").write_text(
        "log4j.rootLogger=INFO, out\nlog4j.logger.org.springframework=WARN\n"
        "log4j.logger.org.apache.xbean=WARN\n"
        "log4j.appender.out=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.out.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.out.layout.ConversionPattern=%d{ISO8601} | %-5p | %m | %c | %t%n\n",
        encoding="utf-8",
    )
    (work / "lib").mkdir(exist_ok=True)  # activemq.base/lib: the MQTT codec Debian's package lacks
    for j in EXTRA_JARS:
        if not (work / "lib" / j).exists():
            (work / "lib" / j).symlink_to(JAVA_LIBS / j)
    home = activemq_home()
    cmd = [
        java_bin(),
        "-Xmx256m",
        "-Xms64m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        f"-Dlog4j.configuration=file:{work}/log4j.properties",
        f"-Dactivemq.classpath={work}",
        f"-Dactivemq.home={home}",
        f"-Dactivemq.base={work}",
        f"-Dactivemq.conf={work}",
        f"-Dactivemq.data={work}",
        f"-Djava.io.tmpdir={work}",
        "--add-opens",
        "java.base/java.lang=ALL-UNNAMED",
        "-jar",
        str(home / "bin" / "activemq.jar"),
        "start",
        f"xbean:file:{work}/activemq.xml",
    ]
    log = work / "broker.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    net = Network(proc, log, ow, mq, sum(len(v) for v in ncs.values()))
    try:
        _wait_ready(net)
        yield net
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_ready(net: Network, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    for port in net.mqtt.values():
        while True:
            if net.proc.poll() is not None:
                raise RuntimeError(f"the brokers' JVM exited: {net.text()[-3000:]}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"mqtt port {port} not open: {net.text()[-3000:]}")
            time.sleep(0.2)
    # every networkConnector's bridge (a connector whose target refuses it never comes up: bounded)
    end = min(deadline, time.monotonic() + 15)
    while len(ESTABLISHED.findall(net.text())) < net.connectors and time.monotonic() < end:
        time.sleep(0.2)


def _client(port: int, name: str) -> mqtt.Client:
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"{name}-{uuid.uuid4().hex[:6]}")
    c.connect("127.0.0.1", port, keepalive=30)
    c.loop_start()
    return c


@dataclass(frozen=True)
class Fam:
    """A family for a measurement: its MQTT filter and event topics; every group produces and
    consumes it unless `sources`/`targets` say otherwise."""

    name: str
    topic: str
    events: tuple[str, ...]
    sources: tuple[str, ...] | None = None
    targets: tuple[str, ...] | None = None


def _subscribe(
    net: Network, group: str, f: Fam, got: list[tuple[str, str]], lock: threading.Lock
) -> mqtt.Client:
    def on_message(_c: object, _u: object, msg: mqtt.MQTTMessage) -> None:
        fam, src, event = (msg.payload.decode(errors="replace").split("|") + ["", ""])[:3]
        if fam == f.name:  # another family's publish its filter also matches is not this flow's
            with lock:
                got.append((src, event))

    c = _client(net.mqtt[group], f"sub-{group}")
    c.on_message = on_message
    c.subscribe(f.topic, qos=1)
    return c


def _close(clients: Sequence[mqtt.Client]) -> None:
    for c in clients:
        c.loop_stop()
        c.disconnect()


def measure(
    net: Network, groups: Sequence[str], fams: Sequence[Fam], settle_s: float = 3.0, wait_s: float = 3.0
) -> dict[tuple[str, str, str], frozenset[str]]:
    """(family, source group, target group) -> the event topics that arrived (one publish of each
    event topic per source group, after every consumer subscribed and demand settled)."""
    lock = threading.Lock()
    got: dict[tuple[str, str], list[tuple[str, str]]] = {}
    subs: list[mqtt.Client] = []
    try:
        for f in fams:
            for g in f.targets or groups:
                subs.append(_subscribe(net, g, f, got.setdefault((f.name, g), []), lock))
        time.sleep(settle_s)
        pubs = {g: _client(net.mqtt[g], f"pub-{g}") for g in groups}
        try:
            for f in fams:
                for g in f.sources or groups:
                    for e in f.events:
                        pubs[g].publish(e, f"{f.name}|{g}|{e}", qos=1).wait_for_publish(10)
        finally:
            time.sleep(wait_s)
            _close(list(pubs.values()))
    finally:
        _close(subs)
    return {
        (f.name, src, dst): frozenset(e for s, e in got.get((f.name, dst), []) if s == src)
        for f in fams
        for src in f.sources or groups
        for dst in f.targets or groups
    }
