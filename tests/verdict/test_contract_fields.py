"""Checkers read only the record fields docs/agent-contract.md lists (issue 41), statically.

The verdict's code (harness/verdict/**.py) is parsed with `ast` for the fields it reads from the
agents' records (tests/verdict/fieldreads.py); the reconciliation's fields are its
`RECORD_FIELDS` (spark_analysis/ingest.py). Each must be a row of the contract's field table,
between `<!-- fields:start -->` and `<!-- fields:end -->`. The self-tests show the analysis finds
reads and can fail. Pure (ast and text only): no broker, no Spark.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.verdict.fieldreads import analyse_source, field_reads

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = ROOT / "docs" / "agent-contract.md"
ROW = re.compile(r"^\|\s*`([a-z_]+)`\s*\|")


def contract_fields(text: str) -> dict[str, str]:
    """field -> its row, from the contract's field table."""
    start, end = text.index("<!-- fields:start -->"), text.index("<!-- fields:end -->")
    out = {}
    for line in text[start:end].splitlines():
        m = ROW.match(line)
        if m:
            out[m.group(1)] = line
    return out


def spark_fields() -> set[str]:
    """The names in spark_analysis/ingest.py's RECORD_FIELDS: the fields the job reads."""
    tree = ast.parse((ROOT / "spark_analysis" / "ingest.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == "RECORD_FIELDS" for t in targets) and node.value:
                return {
                    e.elts[0].value
                    for e in getattr(node.value, "elts", [])
                    if isinstance(e, ast.Tuple) and isinstance(e.elts[0], ast.Constant)
                }
    raise AssertionError("spark_analysis/ingest.py has no RECORD_FIELDS")


def unlisted(reads: dict[str, set[str]], listed: dict[str, str]) -> list[str]:
    return [f"{f} (read at {', '.join(sorted(w)[:3])})" for f, w in sorted(reads.items()) if f not in listed]


def test_checkers_read_only_listed_fields() -> None:
    listed = contract_fields(CONTRACT.read_text(encoding="utf-8"))
    paths = sorted(p for p in (ROOT / "harness" / "verdict").rglob("*.py") if "__pycache__" not in p.parts)
    reads = field_reads(paths, ROOT)
    # the analysis sees the checkers' reads at all (a broken analyser would pass vacuously)
    assert {"event", "ts", "role", "reason", "msg_id", "topic", "broker"} <= set(reads), sorted(reads)
    missing = unlisted(reads, listed)
    assert not missing, f"checkers read fields docs/agent-contract.md does not list: {missing}"


def test_reconciliation_reads_only_listed_fields() -> None:
    listed = contract_fields(CONTRACT.read_text(encoding="utf-8"))
    fields = spark_fields()
    assert {"msg_id", "subscription", "handed_to_broker"} <= fields
    extra = sorted(fields - set(listed))
    assert not extra, f"the reconciliation reads fields docs/agent-contract.md does not list: {extra}"


def test_every_listed_field_names_its_readers() -> None:
    for name, row in contract_fields(CONTRACT.read_text(encoding="utf-8")).items():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        assert len(cells) >= 4 and cells[-1], f"field {name}: no `read by` cell in {row!r}"


# -- the analysis itself, on small snippets -------------------------------------------------------
SNIPPET = """
def check(v):
    for agent, recs in v.records.items():
        for r in recs:
            if r.get("event") == "connected" and r["colour"]:
                pass
        x = recs[0]
        if "flavour" in x:
            helper(x)
    rows = load_rows()
    for r in rows:
        r.get("status")          # a reconciliation row: not a record
    first = {}
    for r in v.events("sent"):
        first.setdefault(r.get("msg_id"), r)
    got = first.get("m1", {})
    got.get("size")
    ordered = sorted(v.records.get("a", []), key=lambda r: r["when"])

def helper(rec):
    for k in ("shape", "smell"):
        rec.get(k)
"""


def test_analysis_finds_reads_through_loops_calls_and_dicts() -> None:
    found = analyse_source(SNIPPET)
    assert {"event", "colour", "flavour", "msg_id", "size", "when", "shape", "smell"} <= set(found), found
    assert "status" not in found  # `r` rebound to another kind of row after the loop


def test_an_unlisted_field_fails() -> None:
    table = "<!-- fields:start -->\n| `event` | all | str | every checker |\n<!-- fields:end -->"
    listed = contract_fields(table)
    assert unlisted(analyse_source(SNIPPET), listed)  # colour, flavour, ... are not listed
    only_event = "def f(v):\n    return [r.get('event') for r in v.events('x')]\n"
    assert not unlisted(analyse_source(only_event), listed)
