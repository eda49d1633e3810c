"""Issue 34, topology inputs: every hostile file gives a clear TopologyError (exit 2 from
`bfh topology validate`), never a traceback, a hang or gigabytes of memory; what validate
accepts renders to a well-formed activemq.xml, exactly as a run and compose render it."""

from __future__ import annotations

import os
import time
import xml.parsers.expat
from pathlib import Path

import pytest

from harness.backends.compose import ComposeError
from harness.backends.compose import render as compose_render
from harness.deploy.brokerconf import check_rendered, render_broker
from harness.deploy.plan import make_plan
from harness.topology import TopologyError, load_topology, loads_topology

BOMB = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)
OK_CONF = """<beans xmlns="http://www.springframework.org/schema/beans">
<broker xmlns="http://activemq.apache.org/schema/core" brokerName="x">
  <transportConnectors>
    <transportConnector name="openwire" uri="tcp://0.0.0.0:61616"/>
    <transportConnector name="mqtt" uri="mqtt://0.0.0.0:1883"/>
  </transportConnectors>
</broker>
</beans>
"""


def _load(tmp_path: Path, text: str, **files: str) -> None:
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    (tmp_path / "t.yaml").write_text(text)
    load_topology(tmp_path / "t.yaml")


def _refused(tmp_path: Path, text: str, match: str, **files: str) -> str:
    with pytest.raises(TopologyError, match=match) as info:
        _load(tmp_path, text, **files)
    assert "Traceback" not in str(info.value)
    return str(info.value)


def test_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    t0 = time.monotonic()
    _refused(tmp_path, BOMB + "name: x\n", r"aliases \(\*a\) are not accepted")
    assert time.monotonic() - t0 < 1.0


@pytest.mark.parametrize(
    "text,match",
    [
        ("name: x\ngroups: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 64"),
        ("name: x\x00\n", "unacceptable character #x0000"),
        ("name: x\ngroups:\n  - name: a\n    lock_keep_alive_ms: " + "9" * 5000 + "\n", "4300 digits"),
        ("name: x\ngroups:\n  - name: a\n    xml_file: ~nosuchuser/a.xml\n", "cannot expand '~'"),
        ("name: x\ngroups:\n  - name: a\n    xml_file: /dev/zero\n", "not a regular file"),
        ("name: x\ngroups:\n  - {name: a, kind: pair, config: /dev/zero}\n", "not a regular file"),
        ("name: x\ngroups:\n  - {name: a, kind: pair, config: .}\n", "a directory"),
        ("name: x\ngroups:\n  - name: a\n    connectors: {openwire: {port: true}}\n", "valid integer"),
        ("name: x\ngroups:\n  - name: a\n    connectors: {openwire: {port: 70000}}\n", "out of range"),
        ("name: x\ngroups:\n  - name: a\n    connectors: {openwire: {tls: 1}}\n", "valid boolean"),
        ("name: x\ngroups:\n  - name: a\n    lock_keep_alive_ms: true\n", "valid integer"),
        ("name: x\ngroups:\n  - name: a\n    connectors: [mqtt, openwire, mqtt]\n", "'mqtt' is listed twice"),
        ("name: x\ngroups:\n  - name: a\n    connectors: [{}, openwire]\n", "mapping"),
        (
            "name: x\ngroups:\n  - {name: a, kind: pair}\n  - {name: b, kind: pair}\nbridges:\n"
            "  - {from: a, to: b, network_ttl: true}\n",
            "valid integer",
        ),
    ],
)
def test_hostile_topology_text(tmp_path: Path, text: str, match: str) -> None:
    _refused(tmp_path, text, match)


@pytest.mark.parametrize("kind", ["fifo", "zero", "loop", "dir", "big"])
def test_topology_file_must_be_a_small_regular_file(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "t.yaml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path = Path("/dev/zero")
    elif kind == "loop":
        (tmp_path / "l1").symlink_to(tmp_path / "l2")
        (tmp_path / "l2").symlink_to(tmp_path / "l1")
        path = tmp_path / "l1"
    elif kind == "dir":
        path = tmp_path
    else:
        path.write_text("name: x\n#" + "x" * (5 << 20) + "\n")
    with pytest.raises(TopologyError, match="cannot read topology file") as info:
        load_topology(path)
    assert "\n" not in str(info.value)


def test_symlink_loop_as_xml_file(tmp_path: Path) -> None:
    (tmp_path / "l1").symlink_to(tmp_path / "l2")
    (tmp_path / "l2").symlink_to(tmp_path / "l1")
    _refused(tmp_path, "name: x\ngroups:\n  - name: a\n    xml_file: l1\n", "symbolic links")


def test_hosts_differing_only_in_case_are_refused(tmp_path: Path) -> None:
    text = (
        "name: x\ngroups:\n  - {name: a, kind: pair, config: a.xml}\n  - {name: b, kind: pair}\n"
        "hosts:\n  MQ-B1.prod:61616: b-1\n  mq-b1.prod:61616: b-2\n"
    )
    _refused(tmp_path, text, "differ only in case", **{"a.xml": OK_CONF})


def _rendered(topology_text: str, tmp_path: Path) -> list[str]:
    topo = loads_topology(topology_text, "t.yaml", tmp_path)
    check_rendered(topo)
    plan = make_plan(topo, tmp_path / "run", port_pool=iter(range(20000, 21000)))
    out = []
    for b in plan.brokers.values():
        xml_text = render_broker(plan, b)["activemq.xml"]
        xml.parsers.expat.ParserCreate().Parse(xml_text.encode(), True)  # well-formed
        out.append(xml_text)
    compose_render(topo)  # compose renders the same files, also checked
    return out


@pytest.mark.parametrize(
    "conf",
    [
        OK_CONF.replace("\n  ", "").replace("\n<broker", "<broker").replace(">\n<", "><"),  # one line
        '<beans xmlns="http://www.springframework.org/schema/beans"><broker '
        'xmlns="http://activemq.apache.org/schema/core" brokerName="x"/></beans>',  # self-closing
        OK_CONF.replace(  # dropped (no ws transport here) into a comment: no '--' may remain
            "<transportConnectors>",
            '<transportConnectors><transportConnector name="w" uri="ws://h:1?a=---"/>',
        ),
    ],
    ids=["one-line", "self-closing", "dashes"],
)
def test_imported_config_renders_well_formed(tmp_path: Path, conf: str) -> None:
    (tmp_path / "b.xml").write_text(conf)
    text = "name: one\ngroups:\n  - {name: a, kind: pair, config: b.xml, connectors: [mqtt, openwire]}\n"
    for xml_text in _rendered(text, tmp_path):
        assert "persistenceAdapter" in xml_text and "<transportConnector" in xml_text


def test_property_values_are_escaped(tmp_path: Path) -> None:
    conf = OK_CONF.replace('brokerName="x"', 'brokerName="x" tag="${p.v}"').replace(
        '<beans xmlns="http://www.springframework.org/schema/beans">',
        '<beans xmlns="http://www.springframework.org/schema/beans"><bean class="P"><property '
        'name="locations"><value>file:${activemq.conf}/c.properties</value></property></bean>',
    )
    (tmp_path / "b.xml").write_text(conf)
    (tmp_path / "c.properties").write_text('p.v = a<b&"c"\n')
    text = "name: one\ngroups:\n  - {name: a, kind: pair, config: b.xml}\n"
    assert all('tag="a&lt;b&amp;&quot;c&quot;"' in x for x in _rendered(text, tmp_path))


@pytest.mark.parametrize(
    "template,match",
    [
        ("<beans a=\"{{ ''.__class__.__mro__[1].__subclasses__() }}\"/>", "unsafe"),
        ("<beans>{{ 'x' * 100000000 }}</beans>", "longer than 1M"),
        ('<beans a="{{ broker.nosuch }}"/>', "no attribute"),
        ("<beans a=\"{{ '<' }}\"/>", "not well-formed"),
    ],
)
def test_xml_file_templates_render_sandboxed_and_checked(tmp_path: Path, template: str, match: str) -> None:
    (tmp_path / "t.xml").write_text(template)
    topo = loads_topology("name: x\ngroups:\n  - {name: a, xml_file: t.xml}\n", "t.yaml", tmp_path)
    with pytest.raises(TopologyError, match=match) as info:
        check_rendered(topo)
    assert "\n" not in str(info.value)


def test_compose_ports_are_range_checked() -> None:
    topo = load_topology("pair")
    with pytest.raises(ComposeError, match="outside 1..65535"):
        compose_render(topo, range(65534, 65540))
    with pytest.raises(ComposeError, match="outside 1..65535"):
        compose_render(topo, api_port=70000)


@pytest.mark.parametrize("argv", [["--client-port", "70000"], ["--api-port", "0"], ["--api-port", "true"]])
def test_compose_cli_refuses_bad_ports(argv: list[str], tmp_path: Path) -> None:
    from harness.cli.main import build_parser

    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["compose", "pair", "--out", str(tmp_path), *argv])
    assert info.value.code == 2
