"""The topology model, its YAML loading and error messages, the plan and the rendered config.

No brokers here: these are fast. Every malformed file must give an error naming the file, the
line and key of the problem, and a fix.
"""

from __future__ import annotations

import json
import socket
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from harness.deploy.brokerconf import render_broker
from harness.deploy.plan import RESERVATIONS, free_ports, make_plan, release_ports
from harness.deploy.tls import make_run_tls
from harness.topology import (
    TopologyError,
    builtin_names,
    builtin_path,
    builtin_topology,
    load_topology,
    loads_topology,
)

GOOD = """\
name: ok
groups:
  - name: a
    kind: pair
    connectors: [mqtt, stomp, openwire]
  - name: b
    kind: standalone
    connectors: [openwire]
bridges:
  - {from: a, to: b, uri: static}
"""

# (id, yaml, line, key, message fragment, fix fragment)
BAD: list[tuple[str, str, int | None, str, str, str]] = [
    ("tab-indent", "name: x\ngroups:\n\t- name: a\n", 3, "(top level)", "not valid YAML", "spaces, not tabs"),
    ("unclosed-flow", "name: x\ngroups: [{name: a\n", 3, "(top level)", "not valid YAML", "fix the YAML"),
    ("empty-file", "", None, "(top level)", "document is empty", "name: <topology-name>"),
    ("top-level-list", "- name: a\n- name: b\n", 1, "(top level)", "document is a list", "groups:"),
    ("missing-name", "groups:\n  - name: a\n", 1, "name", "required key is missing", "add `name:"),
    ("missing-groups", "name: x\n", 1, "groups", "required key is missing", "add `groups:`"),
    ("empty-groups", "name: x\ngroups: []\n", 2, "groups", "at least 1 item", "at least one"),
    (
        "bad-topology-name",
        "name: My Topology\ngroups:\n  - name: a\n",
        1,
        "name",
        "not a valid name",
        "lowercase letters",
    ),
    (
        "unknown-group-key",
        "name: x\ngroups:\n  - name: a\n    conectors: [mqtt, openwire]\n",
        4,
        "groups[0].conectors",
        "unknown key 'conectors'",
        "did you mean 'connectors'",
    ),
    (
        "bad-kind",
        "name: x\ngroups:\n  - name: a\n    kind: triple\n",
        4,
        "groups[0].kind",
        "'triple'",
        "did you mean 'trio'",
    ),
    (
        "unknown-connector",
        "name: x\ngroups:\n  - name: a\n    connectors: {amqp: {}, openwire: {}}\n",
        4,
        "groups[0].connectors.amqp",
        "unknown connector 'amqp'",
        "openwire, mqtt or stomp",
    ),
    (
        "no-openwire",
        "name: x\ngroups:\n  - name: a\n    connectors: [mqtt]\n",
        4,
        "groups[0].connectors",
        "needs an 'openwire' connector",
        "add `openwire`",
    ),
    (
        "port-out-of-range",
        "name: x\ngroups:\n  - name: a\n    connectors:\n      openwire: {port: 70000}\n",
        5,
        "groups[0].connectors.openwire.port",
        "out of range",
        "<= 65535",
    ),
    (
        "port-not-int",
        "name: x\ngroups:\n  - name: a\n    connectors:\n      openwire: {port: high}\n",
        5,
        "groups[0].connectors.openwire.port",
        "integer",
        "whole number",
    ),
    (
        "pinned-port-clash",
        "name: x\ngroups:\n  - name: a\n    connectors:\n      openwire: {port: 21000}\n"
        "  - name: b\n    connectors:\n      openwire: {port: 21001}\n",
        8,
        "groups[1].connectors.openwire.port",
        "already pinned for a-2 openwire",
        "distinct ports",
    ),
    (
        "lock-interval-too-small",
        "name: x\ngroups:\n  - name: a\n    lock_acquire_sleep_ms: 5\n",
        4,
        "groups[0].lock_acquire_sleep_ms",
        "out of range",
        ">= 100",
    ),
    (
        "negative-keepalive",
        "name: x\ngroups:\n  - name: a\n    lock_keep_alive_ms: -1\n",
        4,
        "groups[0].lock_keep_alive_ms",
        "out of range",
        ">= 0",
    ),
    (
        "duplicate-group",
        "name: x\ngroups:\n  - name: a\n  - name: b\n  - name: a\n",
        5,
        "groups[2].name",
        "already used by groups[0]",
        "unique name",
    ),
    (
        "group-named-like-broker",
        "name: x\ngroups:\n  - name: a\n  - name: a-1\n",
        4,
        "groups[1].name",
        "also the name of a broker",
        "rename",
    ),
    (
        "duplicate-yaml-key",
        "name: x\ngroups:\n  - name: a\n    kind: pair\n    kind: trio\n",
        5,
        "groups[0].kind",
        "appears twice",
        "remove one",
    ),
    (
        "bridge-unknown-group",
        "name: x\ngroups:\n  - name: alpha\n  - name: beta\nbridges:\n  - {from: alpha, to: betta}\n",
        6,
        "bridges[0].to",
        "unknown group 'betta'",
        "did you mean 'beta'",
    ),
    (
        "bridge-to-itself",
        "name: x\ngroups:\n  - name: a\nbridges:\n  - from: a\n    to: a\n",
        5,
        "bridges[0]",
        "two different groups",
        "point `to`",
    ),
    (
        "bridge-bad-uri",
        "name: x\ngroups:\n  - name: a\n  - name: b\nbridges:\n  - {from: a, to: b, uri: masterslav}\n",
        6,
        "bridges[0].uri",
        "'masterslav'",
        "did you mean 'masterslave'",
    ),
    (
        "bridge-missing-to",
        "name: x\ngroups:\n  - name: a\n  - name: b\nbridges:\n  - {from: a}\n",
        6,
        "bridges[0].to",
        "required key is missing",
        "add `to: <group>`",
    ),
    (
        "masterslave-to-standalone",
        "name: x\ngroups:\n  - name: a\n  - name: b\n    kind: standalone\nbridges:\n  - {from: a, to: b}\n",
        7,
        "bridges[0].uri",
        "needs at least two target brokers",
        "uri: static",
    ),
    (
        "others-of-standalone",
        "name: x\ngroups:\n  - name: a\n    kind: standalone\n  - name: b\nbridges:\n"
        "  - {from: a, to: b, from_members: others}\n",
        7,
        "bridges[0].from_members",
        "no 'others'",
        "from_members: all",
    ),
    (
        "multicast-target-members",
        "name: x\ngroups:\n  - name: a\n  - name: b\nbridges:\n"
        "  - {from: a, to: b, uri: multicast, target_members: first}\n",
        6,
        "bridges[0].target_members",
        "discovered",
        "remove target_members",
    ),
    (
        "network-ttl-zero",
        "name: x\ngroups:\n  - name: a\n  - name: b\nbridges:\n  - {from: a, to: b, network_ttl: 0}\n",
        6,
        "bridges[0].network_ttl",
        "out of range",
        ">= 1",
    ),
    (
        "duplex-not-bool",
        "name: x\ngroups:\n  - name: a\n  - name: b\nbridges:\n  - {from: a, to: b, duplex: maybe}\n",
        6,
        "bridges[0].duplex",
        "boolean",
        "true or false",
    ),
    (
        "duplicate-bridge",
        "name: x\ngroups:\n  - name: a\n  - name: b\nbridges:\n  - {from: a, to: b}\n"
        "  - {from: a, to: b, duplex: true}\n",
        7,
        "bridges[1]",
        "already has a bridge",
        "distinct `name`",
    ),
    (
        "bridge-unknown-attribute",
        "name: x\ngroups:\n  - name: a\n  - name: b\nbridges:\n"
        "  - {from: a, to: b, attributes: {syncDurableSub: true}}\n",
        6,
        "bridges[0].attributes.syncDurableSub",
        "not a networkConnector attribute",
        "did you mean 'syncDurableSubs'",
    ),
    (
        "user-without-password",
        "name: x\ngroups:\n  - name: a\nusers:\n  - name: admin\n",
        5,
        "users[0].password",
        "required key is missing",
        "password: <secret>",
    ),
    (
        "user-empty-password",
        "name: x\ngroups:\n  - name: a\nusers:\n  - {name: admin, password: ''}\n",
        5,
        "users[0].password",
        "at least 1 character",
        "non-empty",
    ),
    (
        "duplicate-user",
        "name: x\ngroups:\n  - name: a\nusers:\n  - {name: u, password: p}\n  - {name: u, password: q}\n",
        6,
        "users[1].name",
        "defined twice",
        "one entry per user",
    ),
    (
        "two-bridge-users",
        "name: x\ngroups:\n  - name: a\nusers:\n  - {name: u, password: p, bridge: true}\n"
        "  - {name: v, password: q, bridge: true}\n",
        6,
        "users[1].bridge",
        "only one user",
        "bridge: true",
    ),
    (
        "fragment-not-xml",
        "name: x\ngroups:\n  - name: a\n    xml_fragment: |\n      <destinationPolicy>\n"
        "        <policyMap>\n      </destinationPolicy>\n",
        7,
        "groups[0].xml_fragment",
        "not well-formed XML",
        "close every element",
    ),
    (
        "fragment-unknown-element",
        "name: x\ngroups:\n  - name: a\n    xml_fragment: <destinationPolicies/>\n",
        4,
        "groups[0].xml_fragment",
        "not an element <broker> accepts",
        "did you mean <destinationPolicy>",
    ),
    (
        "fragment-generated-element",
        "name: x\ngroups:\n  - name: a\n    xml_fragment: <transportConnectors/>\n",
        4,
        "groups[0].xml_fragment",
        "generated by the harness",
        "xml_file",
    ),
    (
        "fragment-and-file",
        "name: x\ngroups:\n  - name: a\n    xml_fragment: <services/>\n    xml_file: /etc/hostname\n",
        4,
        "groups[0].xml_fragment",
        "exclusive",
        "keep one",
    ),
    (
        "xml-file-missing",
        "name: x\ngroups:\n  - name: a\n    xml_file: no-such-activemq.xml\n",
        4,
        "groups[0].xml_file",
        "cannot read",
        "relative to the topology file",
    ),
]


def _load_text(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "topo.yaml"
    f.write_text(text, encoding="utf-8")
    return f


def test_bad_table_is_big_enough() -> None:
    assert len(BAD) >= 15
    assert len({case[0] for case in BAD}) == len(BAD)


@pytest.mark.parametrize(("case", "text", "line", "key", "message", "fix"), BAD, ids=[c[0] for c in BAD])
def test_bad_topology_gives_clear_error(
    tmp_path: Path, case: str, text: str, line: int | None, key: str, message: str, fix: str
) -> None:
    path = _load_text(tmp_path, text)
    with pytest.raises(TopologyError) as ei:
        load_topology(path)
    err = str(ei.value)
    assert str(path) in err, err
    prefix = f"{path}:{line}: " if line else f"{path}: "
    matching = [ln.strip() for ln in err.splitlines()[1:] if ln.strip().startswith(prefix + key + ":")]
    assert matching, f"no problem reported at {prefix}{key}:\n{err}"
    assert any(message in ln for ln in matching), f"{message!r} not in\n{err}"
    assert any("Fix: " in ln and fix in ln.split("Fix: ", 1)[1] for ln in matching), (
        f"fix {fix!r} not in\n{err}"
    )
    assert ei.value.problems, "the error carries its problems for programs"


def test_all_problems_reported_at_once(tmp_path: Path) -> None:
    text = "name: x\ngroups:\n  - name: a\n    kind: triple\n  - name: b\n    connectors: [amqp, openwire]\n"
    with pytest.raises(TopologyError) as ei:
        load_topology(_load_text(tmp_path, text))
    assert len(ei.value.problems) == 2, str(ei.value)
    assert "(2 problems)" in str(ei.value)


def test_missing_file_and_unknown_builtin() -> None:
    with pytest.raises(TopologyError, match=r"cannot read topology file.*built-in name: .*network-of-pairs"):
        load_topology("/nonexistent/topo.yaml")
    with pytest.raises(TopologyError, match=r"did you mean 'network-of-pairs'"):
        builtin_topology("network-of-pair")


def test_good_topology_and_defaults(tmp_path: Path) -> None:
    t = load_topology(_load_text(tmp_path, GOOD))
    a, b = t.groups
    assert (a.size, b.size) == (2, 1)
    assert a.member_names() == ["a-1", "a-2"]
    assert a.lock_keep_alive_ms == 2000 and a.lock_acquire_sleep_ms == 1000
    assert t.bridges[0].source == "a" and t.bridges[0].target == "b" and not t.bridges[0].duplex
    assert t.broker_names() == ["a-1", "a-2", "b-1"]


EXPECTED_BUILTINS = {
    "pair",
    "pair-stomp",
    "pair-nio",
    "pair-fleet",
    "network-fleet",
    "network-of-pairs",
    "seed003-ha-network",
    "seed003-ha-network-static",
    "seed003-ha-network-masterslave",
    "seed002-static-list",
    "secure-pair",
}


def test_builtins_validate_and_render(tmp_path: Path) -> None:
    assert set(builtin_names()) >= EXPECTED_BUILTINS
    for name in builtin_names():
        t = builtin_topology(name)
        assert load_topology(builtin_path(name)) == t
        plan = make_plan(t, tmp_path / name)
        if t.uses_tls:
            make_run_tls(plan.tls_dir, list(plan.brokers))
        for b in plan.brokers.values():
            xml = render_broker(plan, b)["activemq.xml"]
            root = ET.fromstring(xml.encode())  # well-formed
            broker = root.find("{http://activemq.apache.org/schema/core}broker")
            assert broker is not None and broker.get("brokerName") == b.name


def test_plan_ports_links_and_bridge_uris(tmp_path: Path) -> None:
    plan = make_plan(builtin_topology("network-of-pairs"), tmp_path)
    ports = [p for b in plan.brokers.values() for p in b.ports.values()]
    ports += [lk.listen_port for lk in plan.links]
    assert len(ports) == len(set(ports)), "a port was allocated twice"
    for p in ports:
        assert (RESERVATIONS / str(p)).exists(), "allocated ports are reserved machine-wide"
    # One proxied link per client connector and per (bridging member, target member).
    assert len([lk for lk in plan.links if lk.kind == "client"]) == 4 * 3
    assert {lk.name for lk in plan.links if lk.kind == "bridge"} == {
        f"bridge-{s}-to-{t}"
        for s, t in [
            ("a-1", "b-1"),
            ("a-1", "b-2"),
            ("a-2", "b-1"),
            ("a-2", "b-2"),
            ("b-1", "a-1"),
            ("b-1", "a-2"),
            ("b-2", "a-1"),
            ("b-2", "a-2"),
        ]
    }
    a1 = next(b for b in plan.bridges if b.source_broker == "a-1")
    l1, l2 = plan.links_of("b-1"), plan.links_of("b-2")
    to_b1 = next(lk for lk in l1 if lk.source == "a-1")
    to_b2 = next(lk for lk in l2 if lk.source == "a-1")
    assert a1.uri == f"masterslave:(tcp://{to_b1.listen},tcp://{to_b2.listen})"
    assert plan.client_urls("mqtt", "a") == [
        plan.client_link("a-1", "mqtt").listen,
        plan.client_link("a-2", "mqtt").listen,
    ]
    assert len(plan.bridge_links("a", "b")) == 4


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("masterslave", "masterslave:(tcp://{1},tcp://{2})"),
        ("failover", "static:(failover:(tcp://{1},tcp://{2})?randomize=false&maxReconnectAttempts=0)"),
        ("static-list", "static:(tcp://{1},tcp://{2})"),
    ],
)
def test_bridge_uri_forms(tmp_path: Path, uri: str, expected: str) -> None:
    t = loads_topology(
        f"name: x\ngroups:\n  - name: a\n  - name: b\nbridges:\n  - {{from: a, to: b, uri: {uri}}}\n"
    )
    plan = make_plan(t, tmp_path)
    b = next(b for b in plan.bridges if b.source_broker == "a-1")
    l1, l2 = (plan.links_of(f"b-{i}") for i in (1, 2))
    e = expected.replace("{1}", next(lk for lk in l1 if lk.source == "a-1").listen)
    e = e.replace("{2}", next(lk for lk in l2 if lk.source == "a-1").listen)
    assert b.uri == e


def test_seed003_shapes(tmp_path: Path) -> None:
    static = make_plan(builtin_topology("seed003-ha-network-static"), tmp_path / "s")
    by_src = {b.source_broker: b for b in static.bridges}
    assert by_src["a-1"].spec.duplex and not by_src["a-2"].spec.duplex
    assert by_src["a-1"].uri.startswith("static:(tcp://") and "," not in by_src["a-1"].uri  # names b-1 only
    mc = make_plan(builtin_topology("seed003-ha-network"), tmp_path / "m")
    assert mc.multicast is not None
    assert all(b.uri.startswith(f"multicast://{mc.multicast.address}") for b in mc.bridges)
    assert {b.uri.split("group=")[1].split("&")[0] for b in mc.bridges} == {
        mc.multicast.group_name("a"),
        mc.multicast.group_name("b"),
    }
    # Each broker advertises its own proxied discovery link, so discovered bridges are cuttable.
    for name in mc.brokers:
        link = mc.discovery_link(name)
        assert link is not None and link.upstream_port == mc.brokers[name].ports["openwire"]
        xml = render_broker(mc, mc.brokers[name])["activemq.xml"]
        assert f'key="{link.upstream_port}" value="{link.listen_port}"' in xml
    # Two runs never share a multicast group.
    other = make_plan(builtin_topology("seed003-ha-network"), tmp_path / "m2")
    assert other.multicast is not None and other.multicast.prefix != mc.multicast.prefix


def test_pinned_ports(tmp_path: Path) -> None:
    base = free_ports(3)[0]
    release_ports([base])
    t = loads_topology(f"name: x\ngroups:\n  - name: a\n    connectors:\n      openwire: {{port: {base}}}\n")
    plan = make_plan(t, tmp_path)
    assert plan.brokers["a-1"].ports["openwire"] == base
    assert plan.brokers["a-2"].ports["openwire"] == base + 1


def test_free_ports_never_repeat_across_processes(tmp_path: Path) -> None:
    import subprocess
    import sys

    # each child keeps its reservations until its stdin closes: a port of a child that has exited
    # has lapsed and may rightly be handed out again
    code = (
        "from harness.deploy.plan import free_ports; import json, sys; "
        "print(json.dumps(free_ports(200)), flush=True); sys.stdin.read()"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    seen: list[int] = []
    try:
        mine = free_ports(100)
        for p in procs:
            assert p.stdout is not None
            seen += json.loads(p.stdout.readline())
        seen += mine
    finally:
        for p in procs:
            p.communicate(timeout=60)
    assert len(seen) == len(set(seen)) == 700
    for port in seen[-50:]:  # still reserved by this process: nobody else may have bound them
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))


def test_lapsed_reservations_are_taken_over_by_one_process_each(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    lo, hi = 21000, 21200
    for port in range(lo, hi):  # every port's reservation has lapsed (pid 1 was not started at 0)
        (tmp_path / str(port)).write_text(json.dumps({"pid": 1, "created": 0}))
    code = (
        f"import harness.deploy.plan as hp, json, sys; hp.PORT_RANGE = ({lo}, {hi}); sys.stdin.readline(); "
        "print(json.dumps(hp.free_ports(30)), flush=True); sys.stdin.read()"
    )
    env = dict(os.environ, BFH_PORT_DIR=str(tmp_path))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        for _ in range(6)
    ]
    seen: list[int] = []
    try:
        time.sleep(2)  # all children imported and waiting: release them together to race
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            assert p.stdout is not None
            seen += json.loads(p.stdout.readline())
    finally:
        for p in procs:
            p.communicate(timeout=60)
    assert len(seen) == len(set(seen)) == 180


def test_users_redacted_and_bridge_credentials(tmp_path: Path) -> None:
    t = builtin_topology("secure-pair")
    data = t.redacted()
    assert all(u["password"] == "***" for u in data["users"])
    assert "secret" not in json.dumps(data)
    t2 = loads_topology(
        textwrap.dedent("""\
        name: x
        groups:
          - {name: a, kind: standalone}
          - {name: b, kind: standalone}
        bridges:
          - {from: a, to: b, uri: static}
        users:
          - {name: app, password: app-pw}
          - {name: net, password: net-pw, bridge: true}
        """)
    )
    plan = make_plan(t2, tmp_path)
    xml = render_broker(plan, plan.brokers["a-1"])["activemq.xml"]
    assert 'userName="net" password="net-pw"' in xml
    assert 'anonymousAccessAllowed="false"' in xml
    assert 'username="app" password="app-pw"' in xml


def test_xml_file_is_a_template_relative_to_the_topology(tmp_path: Path) -> None:
    (tmp_path / "mine.xml").write_text(
        textwrap.dedent("""\
        <beans xmlns="http://www.springframework.org/schema/beans">
          <broker xmlns="http://activemq.apache.org/schema/core" brokerName="{{ broker.name }}">
            <transportConnectors>
        {%- for c in connectors %}
              <transportConnector name="{{ c.name }}" uri="{{ c.uri }}"/>
        {%- endfor %}
            </transportConnectors>
          </broker>
        </beans>
        """)
    )
    topo = tmp_path / "t.yaml"
    topo.write_text("name: x\ngroups:\n  - {name: a, kind: standalone, xml_file: mine.xml}\n")
    t = load_topology(topo)
    assert t.groups[0].xml_file == str(tmp_path / "mine.xml")
    plan = make_plan(t, tmp_path / "run")
    xml = render_broker(plan, plan.brokers["a-1"])["activemq.xml"]
    assert 'brokerName="a-1"' in xml
    assert f'uri="tcp://127.0.0.1:{plan.brokers["a-1"].ports["openwire"]}"' in xml


def test_fragment_lands_inside_broker(tmp_path: Path) -> None:
    t = loads_topology(
        textwrap.dedent("""\
        name: x
        groups:
          - name: a
            xml_fragment: |
              <destinationPolicy><policyMap><policyEntries>
                <policyEntry queue=">" prioritizedMessages="true"/>
              </policyEntries></policyMap></destinationPolicy>
        """)
    )
    plan = make_plan(t, tmp_path)
    root = ET.fromstring(render_broker(plan, plan.brokers["a-1"])["activemq.xml"].encode())
    broker = root.find("{http://activemq.apache.org/schema/core}broker")
    assert broker is not None
    assert broker.find("{http://activemq.apache.org/schema/core}destinationPolicy") is not None


def test_example_files_are_yaml_documents_with_comments() -> None:
    for name in builtin_names():
        text = builtin_path(name).read_text()
        assert text.lstrip().startswith("#"), f"{name}: explain the example in a leading comment"
        assert yaml.safe_load(text)["name"] == name


def test_bridge_options_render(tmp_path: Path) -> None:
    t = loads_topology(
        "name: x\ngroups:\n  - name: a\n  - name: b\nbridges:\n"
        "  - {from: a, to: b, duplex: true, network_ttl: 3, conduit_subscriptions: false,\n"
        "     decrease_network_consumer_priority: true, from_members: first, reconnect_delay_ms: 1000,\n"
        "     attributes: {syncDurableSubs: true, prefetchSize: 10, destinationFilter: 'Consumer.>'}}\n"
    )
    plan = make_plan(t, tmp_path)
    assert [b.source_broker for b in plan.bridges] == ["a-1"]
    xml = render_broker(plan, plan.brokers["a-1"])["activemq.xml"]
    nc = ET.fromstring(xml.encode()).find(".//{http://activemq.apache.org/schema/core}networkConnector")
    assert nc is not None
    assert (nc.get("duplex"), nc.get("networkTTL"), nc.get("conduitSubscriptions")) == ("true", "3", "false")
    assert nc.get("decreaseNetworkConsumerPriority") == "true"
    assert nc.get("uri", "").endswith("?maxReconnectDelay=1000")
    assert (nc.get("syncDurableSubs"), nc.get("prefetchSize"), nc.get("destinationFilter")) == (
        "true",
        "10",
        "Consumer.>",
    )
    assert "<networkConnector " not in render_broker(plan, plan.brokers["a-2"])["activemq.xml"]
