"""Fuzz: topology YAML, structure-aware (the built-in files mutated at random key paths, then
written back as YAML, sometimes with text-level damage). Every case is a Topology that renders
(what `bfh topology validate` accepts, a run can render) or a TopologyError: never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.deploy.brokerconf import check_rendered
from harness.topology import TopologyError, builtin_names, builtin_path, loads_topology

from .common import FUZZ, Tally, mutated

KEYS = [
    "name", "groups", "bridges", "users", "hosts", "kind", "connectors", "port", "tls", "xml_fragment",
    "xml_file", "config", "lock_keep_alive_ms", "from", "to", "uri", "network_ttl", "attributes",
    "reconnect_delay_ms", "password", "bridge", "from_members", "target_members",
]  # fmt: skip
DOCS = {n: yaml.safe_load(builtin_path(n).read_text()) for n in builtin_names()}
DAMAGE = [
    "&a ",
    "*a",
    "<<: *a\n",
    "\t",
    "\x00",
    ": :",
    "- ",
    "{",
    "[",
    "'",
    "!!python/object:os.system ''",
    "\n  ",
    " " + "9" * 5000,
]


@st.composite
def topology_texts(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(sorted(DOCS)))
    doc = draw(mutated(DOCS[name], KEYS))
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    if draw(st.integers(0, 4)) == 0:  # text-level damage at a random offset
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(DAMAGE)) + text[at:]
    return text


def test_topology_yaml_fuzz(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tally = Tally()

    @settings(FUZZ, max_examples=150)
    @given(text=topology_texts())
    def case(text: str) -> None:
        tally["cases"] += 1
        try:
            topo = loads_topology(text, "fuzz.yaml", tmp_path)
            check_rendered(topo)
        except TopologyError as e:
            assert str(e).strip() and "Traceback" not in str(e)
            tally["refused"] += 1
            return
        tally["valid"] += 1

    case()
    with capsys.disabled():
        print("\n" + tally.report("topology yaml fuzz"))
    assert tally["refused"] and tally["valid"]
