"""The last bad topology inputs of issue 40, through the real `bfh` (a child process): a DOCTYPE in
an imported activemq.xml or an xml_file, keys YAML does not read as text, and `bfh topology
validate` without a file. Each is exit 2 and one line naming the problem (with its line), never a
traceback, and `bfh compose` of a refused file writes nothing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.deploy.brokerconf import check_well_formed
from harness.topology import TopologyError
from tests.cli.support import ROOT, bfh

OPS = ROOT / "examples" / "ops"


def _refused(p: subprocess.CompletedProcess[str], where: str, *words: str) -> str:
    """The one stderr line at `where` (file:line:) naming the problem; exit 2, no traceback."""
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr + p.stdout
    hits = [ln for ln in p.stderr.splitlines() if where in ln]
    assert len(hits) == 1, p.stderr
    assert all(w in hits[0] for w in words), hits[0]
    return hits[0]


def _ops_with(tmp_path: Path, prolog: str, use_entity: bool = True) -> Path:
    """examples/ops with `prolog` before pair-b.xml's <beans> (line 3), whose body uses &ent;."""
    shutil.copytree(OPS, tmp_path / "ops")
    f = tmp_path / "ops" / "prod" / "pair-b.xml"
    text = f.read_text()
    assert text.splitlines()[2].startswith("<beans")
    text = text.replace("<beans", prolog + "\n<beans", 1)
    if use_entity:
        text = text.replace("brokerName=", 'foo="&ent;" brokerName=', 1)
    f.write_text(text)
    return tmp_path / "ops" / "topology.yaml"


@pytest.mark.parametrize(
    "prolog",
    [
        '<!DOCTYPE beans SYSTEM "x.dtd">',  # the entity is declared in a DTD no checker reads
        '<!DOCTYPE beans PUBLIC "-//SPRING//DTD BEAN//EN" "http://www.springframework.org/dtd/spring-beans.dtd">',
        '<!DOCTYPE beans [<!ENTITY ent "x">]>',
    ],
)
def test_imported_config_with_a_doctype_is_refused_at_its_line(tmp_path: Path, prolog: str) -> None:
    topo = _ops_with(tmp_path, prolog)
    _refused(bfh("topology", "validate", str(topo), timeout=60), "pair-b.xml:3:", "DOCTYPE beans", "Fix:")
    out = tmp_path / "stack"
    p = bfh("compose", str(topo), "--out", str(out), timeout=60)
    _refused(p, "pair-b.xml:3:", "DOCTYPE")
    assert not out.exists()  # nothing copied into a broker's configuration


def test_imported_config_without_a_doctype_still_loads(tmp_path: Path) -> None:
    p = bfh("topology", "validate", str(_ops_with(tmp_path, "", use_entity=False)), timeout=60)
    assert p.returncode == 0, p.stderr


def test_xml_file_with_a_doctype_is_refused_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "t.xml").write_text(
        '<?xml version="1.0"?>\n<!DOCTYPE beans SYSTEM "x.dtd">\n<beans a="&e;"/>\n'
    )
    (tmp_path / "t.yaml").write_text("name: x\ngroups:\n  - name: a\n    xml_file: t.xml\n")
    line = _refused(bfh("topology", "validate", str(tmp_path / "t.yaml"), timeout=60), "t.yaml:4:", "DOCTYPE")
    assert "t.xml line 2" in line and "Fix:" in line


def test_a_rendered_activemq_xml_with_a_doctype_is_refused() -> None:
    with pytest.raises(TopologyError, match="line 1: document type declaration <!DOCTYPE beans>") as info:
        check_well_formed('<!DOCTYPE beans SYSTEM "x.dtd">\n<beans a="&e;"/>', "t: broker a-1")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "text,line,key",
    [
        ("name: x\n1: x\ngroups:\n  - name: a\n", 2, "key 1 is a number"),
        ("name: x\n~: y\ngroups:\n  - name: a\n", 2, "key ~ is null"),
        ("name: x\ngroups:\n  - name: a\n    1: x\n", 4, "groups[0].1: key 1 is a number"),
        ("name: x\ngroups:\n  - name: a\n    null: x\n", 4, "key null is null"),
        ("name: x\ngroups:\n  - name: a\n    yes: 1\n", 4, "key yes is true/false"),
        ("name: x\ngroups:\n  - name: a\n    connectors:\n      3: {}\n", 5, "openwire, mqtt or stomp"),
        (
            "name: x\ngroups:\n  - name: a\n  - name: b\nbridges:\n  - from: a\n    to: b\n    ~: y\n",
            8,
            "bridges[0].~: key ~ is null",
        ),
        (
            "name: x\ngroups:\n  - name: a\n  - name: b\nbridges:\n  - from: a\n    to: b\n"
            "    attributes:\n      7: y\n",
            9,
            "key 7 is a number",
        ),
        ("name: x\ngroups:\n  - name: a\nhosts:\n  1: a-1\n", 5, "quote it"),
        # a null list item is not a key: the connector list's own error, at its line (fuzz find)
        ("name: x\ngroups:\n  - name: a\n    connectors:\n    - null\n    - stomp\n", 4, "unknown connector"),
    ],
)
def test_keys_yaml_does_not_read_as_text_are_reported_at_their_line(
    tmp_path: Path, text: str, line: int, key: str
) -> None:
    (tmp_path / "k.yaml").write_text(text)
    p = bfh("topology", "validate", str(tmp_path / "k.yaml"), timeout=60)
    _refused(p, f"k.yaml:{line}:", key, "Fix:")
    assert len([ln for ln in p.stderr.splitlines() if "k.yaml:" in ln and "invalid topology" not in ln]) == 1


@pytest.mark.parametrize("action", ["validate", "show"])
def test_topology_without_a_file_asks_for_one(action: str) -> None:
    p = bfh("topology", action, timeout=60)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stdout == "" and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stderr.startswith("error:") and "bfh topology list" in p.stderr
