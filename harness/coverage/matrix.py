"""The coverage matrix: rows are the faults (baseline first), columns the directed delivery paths,
plus one `promises` cell per row (the run's other promises). Every cell says ok, lost N, dup N, not
routable (predicted) or not exercised, and whether it passed what the topology requires."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from harness.coverage.validate import Coverage, RowResult
from harness.topology.paths import PathPrediction, path_warnings
from harness.verdict.checks.paths import describe

PROMISES_COLUMN = "promises"


def _cell(p: PathPrediction, r: RowResult) -> dict[str, Any]:
    if p.must == "none":
        return {"state": "not_routable", "text": "not routable (predicted)", "ok": None}
    if r.verdict in ("not_run", "error"):
        return {
            "state": "not_exercised",
            "text": "not exercised",
            "ok": None if p.must == "report" else False,
        }
    found = next((c for c in r.cells if (c.get("from"), c.get("to")) == (p.source, p.target)), None)
    if found is None:
        return {"state": "not_exercised", "text": "not exercised", "ok": False}
    if found["state"] == "not_exercised":  # the run went, but nothing was measured on the path
        return {
            **found,
            "state": "no_traffic",
            "text": "no traffic (not exercised)",
            "ok": p.must != "deliver",
        }
    text = describe(found)
    lost_by = sorted({k.split(":")[1] for k in found.get("blame", {}) if k.startswith(("lost:", "missed:"))})
    if found["state"] == "lost" and lost_by:
        text += f" ({', '.join(lost_by)})"
    if not p.routable and found["state"] != "ok":
        text += " (not routable, predicted)"
    return {**found, "text": text, "ok": bool(found["ok"]) if p.must != "report" else None}


def _promises(r: RowResult) -> dict[str, Any]:
    if r.verdict == "not_run":
        return {"state": "not_exercised", "text": "not run (budget)", "ok": False}
    if r.verdict == "error":
        return {"state": "error", "text": f"could not run: {r.error}", "ok": False}
    other = [b for b in r.broken if b != "paths"]
    if r.verdict == "unknown":
        return {"state": "unknown", "text": "unknown", "ok": False}
    if other:
        return {"state": "broken", "text": "broken: " + ", ".join(other), "ok": False, "reasons": r.reasons}
    return {"state": "ok", "text": "ok", "ok": True}


def build(cov: Coverage) -> dict[str, Any]:
    """The matrix as data (the JSON of `bfh validate --json`)."""
    rows: list[dict[str, Any]] = []
    for r in cov.results:
        cells = {p.key: _cell(p, r) for p in cov.predictions}
        cells[PROMISES_COLUMN] = _promises(r)
        rows.append(
            {
                "key": r.row.key,
                "fault": r.row.fault,
                "what": r.row.what,
                "verdict": r.verdict,
                "run_dir": str(r.run_dir) if r.run_dir else None,
                "report": str(r.run_dir / "report.html") if r.run_dir else None,
                "broken": r.broken,
                "reasons": r.reasons,
                "error": r.error,
                "wall_s": r.wall_s,
                "cells": cells,
            }
        )
    failed = [
        (r["key"], k)
        for r in rows
        for k, c in r["cells"].items()
        if c["ok"] is False and c["state"] not in ("not_exercised", "error")
    ]
    untested = [
        (r["key"], k) for r in rows for k, c in r["cells"].items() if c["state"] in ("not_exercised", "error")
    ]
    code = 1 if failed else 2 if untested else 0
    return {
        "topology": cov.topology.name,
        "verdict": {0: "pass", 1: "fail", 2: "incomplete"}[code],
        "exit_code": code,
        "wall_s": round(cov.wall_s, 1),
        "parallel": cov.parallel,
        "budget_s": cov.budget_s,
        "paths": [
            {
                "key": p.key,
                "path": p.label,
                "must": p.must,
                "routable": p.routable,
                "hops": p.hops,
                "why": p.why,
            }
            for p in cov.predictions
        ],
        "warnings": path_warnings(cov.predictions),
        "runs": sum(1 for r in rows if r["verdict"] != "not_run"),
        "cells": sum(len(r["cells"]) for r in rows),
        "failed_cells": [f"{k} / {c}" for k, c in failed],
        "untested_cells": [f"{k} / {c}" for k, c in untested],
        "rows": rows,
    }


def write_json(m: dict[str, Any], out: Path) -> Path:
    out.write_text(json.dumps(m, indent=2, default=str), encoding="utf-8")
    return out


def write_junit(m: dict[str, Any], out: Path) -> Path:
    """One test case per cell: classname the fault row, name the path (or `promises`)."""
    labels = {p["key"]: p["path"] for p in m["paths"]}
    suite = ET.Element("testsuite", name=f"bfh validate {m['topology']}")
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    for r in m["rows"]:
        for key, c in r["cells"].items():
            if c["state"] == "not_routable":
                continue
            counts["tests"] += 1
            tc = ET.SubElement(suite, "testcase", classname=r["key"], name=labels.get(key, key))
            props = ET.SubElement(tc, "properties")
            for k in ("state", "expected", "lost", "duplicated", "dropped"):
                if k in c:
                    ET.SubElement(props, "property", name=k, value=str(c[k]))
            if r.get("report"):
                ET.SubElement(props, "property", name="report", value=str(r["report"]))
            if c["state"] == "not_exercised":
                counts["skipped"] += 1
                ET.SubElement(tc, "skipped", message=c["text"])
            elif c["ok"] is False:
                counts["failures"] += 1
                f = ET.SubElement(tc, "failure", message=f"{r['key']} / {labels.get(key, key)}: {c['text']}")
                f.text = "\n".join(r.get("reasons") or [c["text"]])
    for k, v in counts.items():
        suite.set(k, str(v))
    ET.ElementTree(suite).write(out, encoding="utf-8", xml_declaration=True)
    return out


def html_matrix(m: dict[str, Any], index: Path) -> dict[str, Any]:
    """The template's view of the matrix: relative report links from the index page."""
    rows = []
    for r in m["rows"]:
        href = (
            os.path.relpath(r["report"], index.parent)
            if r.get("report") and Path(r["report"]).exists()
            else None
        )
        rows.append({**r, "href": href})
    cols = [p for p in m["paths"]] + [{"key": "promises", "path": "other promises"}]
    return {**m, "rows": rows, "columns": cols}
