"""Fuzz: an imported deployment activemq.xml (`config:`): examples/ops/prod/*.xml damaged at
random offsets (snippets inserted, spans deleted or doubled, attribute values replaced). Every
case loads and renders well-formed for every member, or is a TopologyError: never a traceback."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.deploy.brokerconf import check_rendered
from harness.topology import TopologyError, load_topology

from .common import FUZZ, Tally

OPS = Path(__file__).resolve().parents[2] / "examples" / "ops"
FILES = sorted(p.name for p in (OPS / "prod").glob("*.xml"))
SNIPPETS = [
    "<", ">", "/>", "&", "&amp;", '"', "'", "--", "<!--", "-->", "]]>", "<![CDATA[x]]>", "${x}",
    "${activemq.data}", "\n", "\x00", "<broker/>", "</broker>", '<broker xmlns="http://activemq.apache.org/schema/core">',
    '<transportConnector name="m" uri="mqtt://0.0.0.0:1883"/>', '<transportConnector uri="ws://h:1?a=---"/>',
    '<networkConnector uri="static:(tcp://MQ-A1.PROD:61616)"/>', "<persistenceAdapter/>", "<kahaDB/>",
    '<!DOCTYPE x [<!ENTITY e "ee">]>', "&e;", "<x>" * 300, "é", "\ufeff",
]  # fmt: skip
ATTR = re.compile(rb'="[^"]*"')


@st.composite
def damaged(draw: st.DrawFn, data: bytes) -> bytes:
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["insert", "delete", "double", "attr"]))
        a = draw(st.integers(0, len(data)))
        b = min(len(data), a + draw(st.integers(0, 200)))
        if op == "insert":
            data = data[:a] + draw(st.sampled_from(SNIPPETS) | st.text(max_size=8)).encode() + data[a:]
        elif op == "delete":
            data = data[:a] + data[b:]
        elif op == "double":
            data = data[:b] + data[a:b] + data[b:]
        else:
            spans = list(ATTR.finditer(data))
            if spans:
                m = spans[draw(st.integers(0, len(spans) - 1))]
                value = draw(st.sampled_from(SNIPPETS) | st.text(max_size=8)).replace('"', "&quot;")
                data = data[: m.start()] + b'="' + value.encode() + b'"' + data[m.end() :]
    return data


def test_imported_activemq_xml_fuzz(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(OPS, tmp_path / "ops")
    originals = {f: (OPS / "prod" / f).read_bytes() for f in FILES}
    tally = Tally()

    @settings(FUZZ, max_examples=120)  # each case checks and renders four brokers
    @given(name=st.sampled_from(FILES), data=st.data())
    def case(name: str, data: st.DataObject) -> None:
        body = data.draw(damaged(originals[name]))
        tally["cases"] += 1
        for f, orig in originals.items():
            (tmp_path / "ops" / "prod" / f).write_bytes(orig)
        (tmp_path / "ops" / "prod" / name).write_bytes(body)
        try:
            check_rendered(load_topology(tmp_path / "ops" / "topology.yaml"))
        except TopologyError as e:
            assert str(e).strip() and "Traceback" not in str(e)
            tally["refused"] += 1
            return
        tally["valid"] += 1

    case()
    with capsys.disabled():
        print("\n" + tally.report("imported activemq.xml fuzz"))
    assert tally["refused"] and tally["valid"]
