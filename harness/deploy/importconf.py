"""Rewrite a deployment's own activemq.xml (`config:` in a topology) for one member of a test run.

The files were checked and their connectors and bridges taken in when the topology was loaded
(harness.topology.imported).

Only what a test environment needs is changed, in place (every other byte of the user's file
is kept): connector ports (harness-allocated, behind the fault proxy; scheme, options and name
kept), the store directory (the group's shared store; adapter settings kept), brokerName,
dataDirectory and `${activemq.*}` properties (the member's folders), memory/store/temp limits
(capped to this machine), networkConnector addresses (through `hosts:` to bridge links of the
fault proxy), the JMX connector (off: its fixed port would clash) and imports of files a test
run lacks (the Jetty console). Each member's rewrite is written next to it as `config.diff`
(a unified diff against the user's file) and `config.json` (source, rewrites, warnings).
"""

from __future__ import annotations

import difflib
import json
import re
import shutil
from html import escape as _esc
from pathlib import Path

from harness.deploy.plan import HOST, BrokerPlan, Plan, connector_uri, free_ports
from harness.topology.activemq import activemq_home
from harness.topology.amqxml import PROPERTY, ConfFile, Node, parse
from harness.topology.confcheck import (
    ADDRESS,
    NETWORK_CONNECTORS,
    STORES,
    UNAVAILABLE,
    check,
    connectors,
    load_properties,
    lookup,
    member_files,
    property_files,
    resolve,
    warnings,
)
from harness.topology.files import read_input

MEMORY_CAP_MB = 128  # half the 256 MB heap the local backend gives each broker
SECRET = re.compile(r'(\b\w*[Pp]assword\s*=\s*)"[^"]*"')


# -- rewriting one member's file -------------------------------------------------------------------


class _Patch:
    """Edits on the user's bytes: whole start tags, element replacements and insertions."""

    def __init__(self, conf: ConfFile) -> None:
        self.conf = conf
        self.tags: dict[Node, bytes] = {}
        self.edits: list[tuple[int, int, bytes]] = []
        self.notes: list[str] = []
        self.opened: list[Node] = []  # self-closing elements given children: <x/> -> <x>...</x>

    def _tag(self, n: Node) -> bytes:
        return self.tags.get(n, self.conf.data[n.start : n.start_end])

    def set_attr(self, n: Node, name: str, value: str) -> None:
        tag = self._tag(n)
        val = _esc(value, quote=True).encode()
        pat = re.compile(rb"(\s" + re.escape(name.encode()) + rb"\s*=\s*)([\"'])(.*?)\2", re.S)
        if pat.search(tag):
            tag = pat.sub(lambda m: m.group(1) + m.group(2) + val + m.group(2), tag, count=1)
        else:
            at = len(tag) - (2 if tag.endswith(b"/>") else 1)
            tag = tag[:at].rstrip() + b" " + name.encode() + b'="' + val + b'"' + tag[at:]
        self.tags[n] = tag

    def del_attr(self, n: Node, name: str) -> None:
        pat = re.compile(rb"\s+" + re.escape(name.encode()) + rb"\s*=\s*([\"']).*?\1", re.S)
        self.tags[n] = pat.sub(b"", self._tag(n), count=1)

    def drop(self, n: Node, why: str) -> None:
        text = self.conf.data[n.start : n.end].decode("utf-8", "replace")
        text = re.sub(r"-(?=-|$)", "- ", text)  # no '--' inside a comment, none before its end
        self.edits.append((n.start, n.end, f"<!-- bfh: left out ({why}): {text} -->".encode()))

    def insert(self, at: int, text: str) -> None:
        self.edits.append((at, at, text.encode()))

    def insert_child(self, n: Node, text: str) -> None:
        """Insert `text` as the last child of `n`: on its own line before the end tag when the
        end tag starts a line, else right before it (a one-line element stays well-formed)."""
        if n.self_closing:
            if n not in self.opened:
                self.opened.append(n)
            self.insert(n.start_end, "\n" + text)
            return
        line_start = self.conf.data.rfind(b"\n", 0, n.close_start) + 1
        own_line = line_start >= n.start_end and not self.conf.data[line_start : n.close_start].strip()
        self.insert(line_start if own_line else n.close_start, text if own_line else "\n" + text)

    def indent(self, n: Node) -> str:
        line_start = self.conf.data.rfind(b"\n", 0, n.start) + 1
        lead = self.conf.data[line_start : n.start]
        return lead.decode() if not lead.strip() else "    "

    def apply(self) -> bytes:
        closing = []
        for n in self.opened:  # <x .../> becomes <x ...>, closed after the inserted children
            tag = self._tag(n)
            self.tags[n] = tag[:-2].rstrip() + b">" if tag.endswith(b"/>") else tag
            qname = re.match(rb"<([^\s/>]+)", tag)
            closing.append((n.start_end, n.start_end, b"</" + (qname[1] if qname else b"") + b">"))
        # stable sort, applied back to front: of inserts at one offset the first listed ends last
        edits = closing + self.edits + [(n.start, n.start_end, t) for n, t in self.tags.items()]
        out = self.conf.data
        for start, end, text in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
            out = out[:start] + text + out[end:]
        return out


def _size_mb(text: str) -> float | None:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)b?\s*", text, re.I)
    if not m:
        return None
    return float(m[1]) * {"": 1 / 2**20, "k": 1 / 1024, "m": 1, "g": 1024, "t": 2**20}[m[2].lower()]


def _member_props(conf: ConfFile, base: Path, data: Path, home: Path) -> dict[str, str]:
    return {
        **load_properties(conf),
        "activemq.base": str(base),
        "activemq.data": str(data),
        "activemq.conf": str(base / "conf"),
        "activemq.home": str(home),
    }


def render_member(plan: Plan, broker: BrokerPlan, paths: dict[str, str] | None = None) -> dict[str, str]:
    """{filename: text} of the member's conf dir (activemq.xml plus the .properties files it loads);
    writes config.diff and config.json into the member's folder."""
    group = plan.topology.group(broker.group)
    src = member_files(group)[broker.index - 1]
    conf = parse(src)
    paths = paths or {}
    data_dir = Path(paths.get("data_dir", str(broker.data_dir)))
    store_dir = paths.get("store_dir", str(broker.store_dir))
    props = _member_props(conf, data_dir.parent, data_dir, activemq_home())
    p = _Patch(conf)
    b = conf.broker
    assert b is not None
    _broker_attrs(p, b, broker, data_dir)
    _transport(p, b, conf, plan, broker, props)
    _store(p, b, store_dir)
    _limits(p, b, plan)
    _network(p, b, plan, broker)
    for n in b.iter("managementContext"):
        if n.attrs.get("createConnector", "").strip().lower() == "true":
            p.set_attr(n, "createConnector", "false")
            p.notes.append(f"line {n.line}: JMX connector off (its fixed port would clash between members)")
    for n in conf.root.iter("import"):
        p.drop(n, "not part of a test run")
        p.notes.append(f"line {n.line}: <import resource={n.attrs.get('resource', '')!r}> left out")
    xml = _resolve_outside_comments(p.apply().decode("utf-8", "replace"), props)
    if PROPERTY.search(conf.data.decode("utf-8", "replace")):
        p.notes.append("properties ${activemq.*} resolved to the member's folders")
    files = {"activemq.xml": xml}
    for f in property_files(conf):
        files[f.name] = read_input(f).decode("utf-8", "replace")
    _write_record(plan, broker, src, conf, xml, p.notes)
    return files


def _broker_attrs(p: _Patch, b: Node, broker: BrokerPlan, data_dir: Path) -> None:
    old = b.attrs.get("brokerName")
    p.set_attr(b, "brokerName", broker.name)
    p.notes.append(f"line {b.line}: brokerName {old or '(unset)'} -> {broker.name}")
    p.set_attr(b, "dataDirectory", str(data_dir))
    for attr, sub in (("tmpDataDirectory", "tmp"), ("schedulerDirectory", "scheduler")):
        if attr in b.attrs:
            p.set_attr(b, attr, str(data_dir / sub))
    p.notes.append(f"line {b.line}: dataDirectory -> the member's folder")


def _transport(
    p: _Patch, b: Node, conf: ConfFile, plan: Plan, broker: BrokerPlan, props: dict[str, str]
) -> None:
    taken: set[str] = set()
    extra = 0
    cs = connectors(conf, props)
    for c in cs:
        if c.scheme in UNAVAILABLE:
            continue
        if c.protocol and (c.protocol in taken or c.protocol not in broker.ports):
            extra += 1
        taken.add(c.protocol or "")
    spare = iter(free_ports(extra)) if extra else iter(())
    taken = set()
    for c in cs:
        n = c.node
        if c.scheme in UNAVAILABLE:
            p.drop(n, f"no {c.scheme} transport in this ActiveMQ build")
            p.notes.append(f"line {n.line}: {c.scheme} connector {c.name!r} left out")
            continue
        if "discoveryUri" in n.attrs:
            p.del_attr(n, "discoveryUri")
        if not c.protocol:
            continue
        first = c.protocol not in taken and c.protocol in broker.ports
        port = broker.ports[c.protocol] if first else next(spare)
        taken.add(c.protocol)
        p.set_attr(n, "uri", f"{c.scheme}://{HOST}:{port}{c.rest}")
        how = "behind the fault proxy" if first else "not proxied: a second connector of that protocol"
        p.notes.append(f"line {n.line}: connector {c.name!r} {c.host}:{c.port} -> {HOST}:{port} ({how})")
    missing = [x for x in broker.ports if x not in taken]
    for x in missing:
        p.notes.append(f"{x} connector added (the topology lists it; the file has none)")
    added = {x: connector_uri(x, broker.ports[x]) for x in missing}
    witness = getattr(broker, "witness_port", None)  # the harness's own observer connector
    if witness:
        added["bfh-witness"] = f"tcp://{HOST}:{witness}"
    if not added:
        return
    tcs = b.find("transportConnectors")
    if tcs:
        ind = p.indent(tcs[0]) + "    "
        text = "".join(f'{ind}<transportConnector name="{x}" uri="{u}"/>\n' for x, u in added.items())
        p.insert_child(tcs[0], text)
    else:
        ind = p.indent(b) + "    "
        inner = "".join(f'{ind}    <transportConnector name="{x}" uri="{u}"/>\n' for x, u in added.items())
        _insert_in_broker(p, b, f"{ind}<transportConnectors>\n{inner}{ind}</transportConnectors>\n")


def _insert_in_broker(p: _Patch, b: Node, text: str) -> None:
    p.insert_child(b, text)


def _store(p: _Patch, b: Node, store_dir: str) -> None:
    adapters = [c for pa in b.find("persistenceAdapter") for c in pa.children if c.tag in STORES]
    for a in adapters:
        old = a.attrs.get("directory", "(default)")
        p.set_attr(a, "directory", store_dir)
        p.notes.append(
            f"line {a.line}: <{a.tag}> directory {old} -> the group's shared store (settings kept)"
        )
    if not b.find("persistenceAdapter"):
        ind = p.indent(b) + "    "
        _insert_in_broker(
            p,
            b,
            f"{ind}<persistenceAdapter>\n"
            f'{ind}    <kahaDB directory="{store_dir}"/>\n'
            f"{ind}</persistenceAdapter>\n",
        )
        p.notes.append("persistenceAdapter added: kahaDB on the group's shared store")


def _limits(p: _Patch, b: Node, plan: Plan) -> None:
    run_dir = plan.run_dir if plan.run_dir.exists() else Path("/")
    free_mb = shutil.disk_usage(run_dir).free / 2**20
    disk_cap = max(64, int(free_mb / 2 / max(1, len(plan.brokers))))
    caps = {"memoryUsage": MEMORY_CAP_MB, "storeUsage": disk_cap, "tempUsage": disk_cap}
    for n in b.iter():
        if n.tag not in caps or "limit" not in n.attrs:
            continue
        size = _size_mb(n.attrs["limit"])
        if size is not None and size > caps[n.tag]:
            p.set_attr(n, "limit", f"{caps[n.tag]} mb")
            p.notes.append(
                f"line {n.line}: {n.tag} limit {n.attrs['limit']} -> {caps[n.tag]} mb (this machine)"
            )


def _network(p: _Patch, b: Node, plan: Plan, broker: BrokerPlan) -> None:
    hosts = plan.topology.hosts
    links = {lk.broker: lk for lk in plan.links if lk.kind == "bridge" and lk.source == broker.name}
    for nc in b.find("networkConnectors"):
        for n in nc.children:
            if n.tag not in NETWORK_CONNECTORS or "uri" not in n.attrs:
                continue
            uri = n.attrs["uri"]

            def sub(m: re.Match[str]) -> str:
                member = lookup(hosts, m["host"], m["port"])
                link = links.get(member or "")
                return f"{m['scheme']}://{link.listen}" if link else m.group(0)

            new = ADDRESS.sub(sub, uri)
            if new != uri:
                p.set_attr(n, "uri", new)
                p.notes.append(
                    f"line {n.line}: networkConnector {n.attrs.get('name', '')!r} hosts -> fault proxy links"
                )


def _resolve_outside_comments(text: str, props: dict[str, str]) -> str:
    # values are XML-escaped: Spring substitutes after parsing, this text is parsed again
    safe = {k: _esc(v, quote=True) for k, v in props.items()}
    parts = re.split(r"(<!--.*?-->)", text, flags=re.S)
    return "".join(part if part.startswith("<!--") else resolve(part, safe) for part in parts)


def _write_record(
    plan: Plan, broker: BrokerPlan, src: Path, conf: ConfFile, xml: str, notes: list[str]
) -> None:
    original = conf.data.decode("utf-8", "replace").splitlines(keepends=True)
    rel = f"brokers/{broker.name}/conf/activemq.xml"
    diff = "".join(difflib.unified_diff(original, xml.splitlines(keepends=True), str(src), rel))
    diff = SECRET.sub(r'\1"***"', diff)  # the diff lands in the HTML report
    findings = check(plan.topology)
    mine = [f.render() for f in warnings(findings) if f.file == str(src)]
    broker.base_dir.mkdir(parents=True, exist_ok=True)
    (broker.base_dir / "config.diff").write_text(diff, encoding="utf-8")
    record = {
        "member": broker.name,
        "group": broker.group,
        "source": str(src),
        "rewrites": notes,
        "warnings": mine,
    }
    (broker.base_dir / "config.json").write_text(json.dumps(record, indent=2), encoding="utf-8")
