"""Static checks of the deployment activemq.xml files a topology imports (`config:`).

Each finding is `file:line: problem. Fix: ...`. Errors stop `bfh topology validate` and
`bfh validate` before anything starts; warnings are printed and kept in the run's report.
The rewrites themselves live in harness/deploy/importconf.py (the import at load time in
harness/topology/imported.py); both read the files through the helpers of
harness/topology/confread.py (re-exported here), so a check and its rewrite never disagree about
what a URI means.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from harness.topology import confbridges
from harness.topology.activemq import BROKER_CHILDREN
from harness.topology.amqxml import AMQ_NS, BEANS_NS, PROPERTY, ConfFile, Node, ParseFailure, parse
from harness.topology.confread import (
    ADDRESS,
    NETWORK_CONNECTORS,
    STORES,
    TLS,
    UNAVAILABLE,
    Connector,
    conf_props,
    connectors,
    file_protocols,
    load_properties,
    lookup,
    member_files,
    network_connectors,
    property_files,
    required_protocols,
    resolve,
)
from harness.topology.files import InputFileError
from harness.topology.model import Group, Topology

DEST_LIST_TAGS = confbridges.DEST_LIST_TAGS
# Catalog scenario that shows the static:(master,slave) bridge failing (see docs/ops.md).
STATIC_LIST_SCENARIO = "network"
UNSHAREABLE = {
    "memoryPersistenceAdapter": "keeps messages in memory only",
    "jdbcPersistenceAdapter": "needs the production database (not available to a test run)",
    "levelDB": "is not in ActiveMQ 5.17 (LevelDB was removed)",
    "replicatedLevelDB": "is not in ActiveMQ 5.17 (LevelDB was removed)",
}

__all__ = [
    "ADDRESS",
    "Finding",
    "NETWORK_CONNECTORS",
    "STORES",
    "UNAVAILABLE",
    "check",
    "connectors",
    "errors",
    "file_protocols",
    "load_properties",
    "lookup",
    "member_files",
    "network_connectors",
    "property_files",
    "required_protocols",
    "resolve",
    "warnings",
]


@dataclass(frozen=True)
class Finding:
    severity: str  # "error" or "warning"
    file: str
    line: int
    message: str
    fix: str

    def render(self) -> str:
        tag = "warning: " if self.severity == "warning" else ""
        return f"{self.file}:{self.line}: {tag}{self.message}. Fix: {self.fix}"


class _Checker:
    def __init__(self, topology: Topology) -> None:
        self.t = topology
        self.out: list[Finding] = []
        self.members = {m: g for g in topology.groups for m in g.member_names()}

    def add(self, sev: str, conf: ConfFile | Path, line: int, msg: str, fix: str) -> None:
        path = conf.path if isinstance(conf, ConfFile) else conf
        f = Finding(sev, str(path), line, msg, fix)
        if f not in self.out:
            self.out.append(f)

    def group(self, g: Group) -> None:
        files = member_files(g)
        confs: dict[Path, ConfFile] = {}
        for f in dict.fromkeys(files):
            try:
                confs[f] = parse(f)
            except ParseFailure as e:
                fix = e.fix or "close every element and escape & and < as &amp; and &lt;"
                self.add("error", f, e.line, str(e), fix)
            except InputFileError as e:
                self.add("error", f, 1, str(e), "check the path in `config:`")
        if len(confs) != len(set(files)):
            return
        for conf in confs.values():
            if conf.broker is None:
                self.add(
                    "error",
                    conf,
                    conf.root.line,
                    f"no <broker> element of {AMQ_NS}",
                    "give the deployment's activemq.xml (a <beans> file with a <broker> inside)",
                )
                return
            self.file(g, conf)
        member_confs = [confs[f] for f in files]
        self.protocols(g, member_confs)
        if g.size > 1:
            self.store(g, member_confs)

    def file(self, g: Group, conf: ConfFile) -> None:
        broker = conf.broker
        assert broker is not None
        props = conf_props(conf)
        self.elements(conf, broker)
        self.properties(conf, props)
        for imp in conf.root.iter("import"):
            if imp.ns == BEANS_NS:
                self.add(
                    "warning",
                    conf,
                    imp.line,
                    f"<import resource={imp.attrs.get('resource', '')!r}> (e.g. the Jetty web console) "
                    "is not part of a test run; the harness leaves it out of the test copy",
                    "nothing to do for the test; production keeps it",
                )
        self.transport(conf, props)
        self.network(g, conf)

    def elements(self, conf: ConfFile, broker: Node) -> None:
        allowed = {
            "transportConnectors": ("transportConnector",),
            "networkConnectors": NETWORK_CONNECTORS,
            "persistenceAdapter": STORES + tuple(UNSHAREABLE),
        }
        for child in broker.children:
            if not child.amq:
                continue
            if child.tag not in BROKER_CHILDREN:
                self._unknown(conf, child, BROKER_CHILDREN, "<broker>")
            for grand in child.children if child.tag in allowed else []:
                if grand.amq and grand.tag not in allowed[child.tag]:
                    self._unknown(conf, grand, allowed[child.tag], f"<{child.tag}>")

    def _unknown(self, conf: ConfFile, n: Node, known: tuple[str, ...], where: str) -> None:
        close = difflib.get_close_matches(n.tag, known, n=1)
        self.add(
            "error",
            conf,
            n.line,
            f"<{n.tag}> is not an element {where} accepts (ActiveMQ 5.17 would not start)",
            (f"did you mean <{close[0]}>? " if close else "") + f"use one of {', '.join(known[:8])}",
        )

    def properties(self, conf: ConfFile, props: dict[str, str]) -> None:
        text = conf.data
        comments = conf.comments()
        for m in PROPERTY.finditer(text.decode("utf-8", "replace")):
            pos = len(text.decode("utf-8", "replace")[: m.start()].encode())
            if any(a <= pos < b for a, b in comments) or m.group(1) in props:
                continue
            line = text.count(b"\n", 0, pos) + 1
            self.add(
                "error",
                conf,
                line,
                f"property ${{{m.group(1)}}} is not defined",
                f"define {m.group(1)} in a .properties file next to the config, loaded by the placeholder "
                "bean as file:${activemq.conf}/NAME.properties, or write the value",
            )

    def transport(self, conf: ConfFile, props: dict[str, str]) -> None:
        ports: dict[int, Connector] = {}
        names: dict[str, Connector] = {}
        for c in connectors(conf, props):
            n = c.node
            if not c.scheme:
                self.add(
                    "error",
                    conf,
                    n.line,
                    f"transportConnector uri {n.attrs.get('uri')!r} is not a URI",
                    "write scheme://host:port, e.g. tcp://0.0.0.0:61616",
                )
                continue
            if c.scheme in TLS:
                self.add(
                    "error",
                    conf,
                    n.line,
                    f"TLS connector {c.scheme}:// of an imported config is not supported yet",
                    "use xml_file (a template with the run's throwaway keystores) for TLS, "
                    "or test a copy with tcp://",
                )
            elif c.scheme in UNAVAILABLE:
                self.add(
                    "warning",
                    conf,
                    n.line,
                    f"{c.scheme}:// connector {c.name!r}: this ActiveMQ build has no {c.scheme} transport; "
                    "the harness leaves it out of the test copy",
                    "nothing to do for the test; only openwire, mqtt and stomp are exercised",
                )
            elif c.protocol is None and c.scheme != "vm":
                self.add(
                    "error",
                    conf,
                    n.line,
                    f"unknown transport scheme {c.scheme}://",
                    "use tcp, nio, auto, mqtt, mqtt+nio, stomp or stomp+nio",
                )
            if "discoveryUri" in n.attrs:
                self.add(
                    "warning",
                    conf,
                    n.line,
                    "discoveryUri (multicast advertisement) would cross-talk "
                    "between test runs; the harness removes it from the test copy",
                    "use static/masterslave networkConnectors to test bridges",
                )
            if c.port is not None and c.port in ports:
                other = ports[c.port]
                self.add(
                    "error",
                    conf,
                    n.line,
                    f"port {c.port} is already used by connector {other.name!r} (line {other.node.line}); "
                    "the broker would fail with 'Address already in use'",
                    "give every transportConnector its own port",
                )
            elif c.port is not None:
                ports[c.port] = c
            if c.name and c.name in names:
                self.add(
                    "error",
                    conf,
                    n.line,
                    f"connector name {c.name!r} is already used on line {names[c.name].node.line}",
                    "give every transportConnector a unique name",
                )
            names.setdefault(c.name, c)

    def network(self, g: Group, conf: ConfFile) -> None:
        hosts = self.t.hosts
        confbridges.duplex_names(self.add, conf, g, hosts, self.members)
        for n in network_connectors(conf):
            if not n.amq or n.tag not in NETWORK_CONNECTORS:
                continue
            confbridges.destinations(self.add, conf, n)
            confbridges.ttl_order(self.add, conf, n)
            uri = n.attrs.get("uri", "")
            label = n.attrs.get("name") or uri
            if n.tag != "networkConnector" or uri.startswith("multicast:"):
                self.add(
                    "error",
                    conf,
                    n.line,
                    f"networkConnector {label!r} uses discovery ({uri or n.tag}), "
                    "which cannot be routed through the fault proxy of an imported config",
                    "name the brokers with static:/masterslave: URIs and map them in `hosts:`",
                )
                continue
            targets: dict[str, list[str]] = {}
            for m in ADDRESS.finditer(uri):
                member = lookup(hosts, m["host"], m["port"])
                addr = f"{m['host']}:{m['port']}" if m["port"] else m["host"]
                if member is None:
                    self.add(
                        "error",
                        conf,
                        n.line,
                        f"networkConnector {label!r} names {addr}, which is not in the topology's hosts:",
                        f"add `{addr}: <member>` under hosts: (members: {', '.join(self.members)})",
                    )
                    continue
                tg = self.members[member]
                if tg.name == g.name:
                    self.add(
                        "error",
                        conf,
                        n.line,
                        f"networkConnector {label!r} names {addr} = {member}, a member of its own group",
                        "map the address to a member of another group",
                    )
                targets.setdefault(tg.name, []).append(member)
            if uri.startswith("static:") and "failover:" not in uri:
                for tg_name, ms in targets.items():
                    if len(ms) > 1 and self.t.group(tg_name).size > 1:
                        self.add(
                            "warning",
                            conf,
                            n.line,
                            f"networkConnector {label!r}: static:({', '.join(ms)}) lists the members of "
                            f"{self.t.group(tg_name).kind} {tg_name!r}; a static list opens one bridge "
                            "per URI "
                            "and retries the slave for ever (seed 002's anti-pattern; the catalog's "
                            f"`{STATIC_LIST_SCENARIO}` scenario shows it: bfh validate --scenarios "
                            f"{STATIC_LIST_SCENARIO})",
                            "use masterslave:(tcp://master:port,tcp://slave:port), or static:(failover:(...)"
                            "?randomize=false&maxReconnectAttempts=0)",
                        )

    def protocols(self, g: Group, confs: list[ConfFile]) -> None:
        need, explicit = required_protocols(g, confs)
        for conf in dict.fromkeys(confs):
            broker = conf.broker
            assert broker is not None
            tcs = broker.find("transportConnectors")
            line = tcs[0].line if tcs else broker.line
            for p in sorted(need - file_protocols(conf)):
                if explicit:
                    self.add(
                        "warning",
                        conf,
                        line,
                        f"the file has no {p} transportConnector; the harness adds one to the test copy "
                        f"because group {g.name!r} lists {p} in connectors (production would not serve {p})",
                        f"add a {p} transportConnector to the deployment's file if its clients use {p}",
                    )
                else:
                    scheme = {"openwire": "tcp", "mqtt": "mqtt", "stomp": "stomp"}[p]
                    port = {"openwire": 61616, "mqtt": 1883, "stomp": 61613}[p]
                    why = (
                        "the harness needs openwire (bridges, readiness)"
                        if p == "openwire"
                        else f"the agents use {p.upper()} (group {g.name!r} lists no `connectors`, so the "
                        "default mqtt + openwire applies)"
                    )
                    self.add(
                        "error",
                        conf,
                        line,
                        f"{why}, but the file has no {p} transportConnector",
                        f'add <transportConnector name="{p}" uri="{scheme}://0.0.0.0:{port}"/> '
                        f"to the file, or list `connectors: [{', '.join(sorted(need))}]` on group "
                        f"{g.name!r} to have the harness "
                        "add it to the test copy (with a warning)",
                    )

    def store(self, g: Group, confs: list[ConfFile]) -> None:
        dirs: dict[str, ConfFile] = {}
        for conf in dict.fromkeys(confs):
            broker = conf.broker
            assert broker is not None
            if broker.attrs.get("persistent", "true").strip().lower() == "false":
                self.add(
                    "error",
                    conf,
                    broker.line,
                    f'persistent="false": the members of {g.kind} {g.name!r} '
                    "cannot share a store (a new master starts empty)",
                    'remove persistent="false" and configure a kahaDB on shared storage',
                )
                continue
            adapters = [c for pa in broker.find("persistenceAdapter") for c in pa.children if c.amq]
            if not adapters:
                self.add(
                    "warning",
                    conf,
                    broker.line,
                    f"no persistenceAdapter: each member of {g.kind} {g.name!r} "
                    "would keep the default KahaDB under its own dataDirectory, so they never share a store "
                    "(two masters); the harness runs them so, as deployed (`store: shared` on the group "
                    "tests them as if they shared one)",
                    '<persistenceAdapter><kahaDB directory="/shared/mount/kahadb"/></persistenceAdapter>',
                )
                continue
            for a in adapters:
                if a.tag in UNSHAREABLE:
                    self.add(
                        "error",
                        conf,
                        a.line,
                        f"<{a.tag}> {UNSHAREABLE[a.tag]}: the members of {g.kind} {g.name!r} cannot share it",
                        "use a kahaDB on storage every member mounts",
                    )
                elif a.tag in STORES:
                    d = a.attrs.get("directory", "")
                    if (
                        not d
                        or d.startswith(("${activemq.base}", "${activemq.data}"))
                        or not d.startswith(("/", "${"))
                    ):
                        self.add(
                            "warning",
                            conf,
                            a.line,
                            f"<{a.tag} directory={d or '(default)'!r}> is inside each member's own "
                            f"folder: in production the members of {g.kind} {g.name!r} would not share a "
                            "store (each would be a master of its own); the harness runs them so, as "
                            "deployed (`store: shared` on the group tests them as if they shared one)",
                            "point directory at storage every member mounts, e.g. /mnt/shared/kahadb",
                        )
                    else:
                        dirs.setdefault(d, conf)
        if len(dirs) > 1:
            (d1, c1), (d2, c2) = list(dirs.items())[:2]
            self.add(
                "warning",
                c2,
                1,
                f"the members of {g.kind} {g.name!r} name different stores ({d1} in "
                f"{c1.path.name}, {d2} here): they would not share one; the harness runs them so, as "
                "deployed (`store: shared` on the group tests them as if they shared one)",
                "give every member of the group the same shared kahaDB directory",
            )


def check(topology: Topology) -> list[Finding]:
    """Every finding for the imported configs of `topology` (empty when it imports none)."""
    c = _Checker(topology)
    for g in topology.groups:
        if g.config:
            c.group(g)
    return c.out


def errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error"]


def warnings(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "warning"]
