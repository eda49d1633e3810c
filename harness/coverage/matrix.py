"""The coverage matrix: rows are the faults (baseline first), columns the directed delivery paths,
plus one `promises` cell per row (the run's other promises). A path carries one or more traffic
families (harness/topology/traffic.py); its cell holds one sub-cell per family (ok, lost N, dup N,
not routable (predicted) or not exercised, and whether it passed what the topology requires) and
says `ok` when every family passed, else which families failed and how."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from harness.contracts import outfile
from harness.coverage import workload
from harness.coverage.validate import Coverage, RowResult
from harness.topology.paths import PathPrediction, path_warnings
from harness.verdict.checks.paths import blocked, describe, what

PROMISES_COLUMN = "promises"
COUNTS = ("expected", "delivered", "lost", "duplicated", "dropped")
#: how a failed family is grouped in its path's cell text, worst first
_FAILED = {
    "lost": "lost",
    "delivered": "delivered (must not)",
    "no_traffic": "no traffic",
    "not_exercised": "not exercised",
}


def _family_cell(p: PathPrediction, r: RowResult) -> dict[str, Any]:
    base = {"family": p.family, "must": p.must, "routable": p.routable, "why": p.why}
    if p.must == "none":
        return {**base, "state": "not_routable", "text": "not routable (predicted)", "ok": None}
    if r.verdict in ("not_run", "error"):
        ok = None if p.must == "report" else False
        return {**base, "state": "not_exercised", "text": "not exercised", "ok": ok}
    key = (p.source, p.target, p.family)
    found = next((c for c in r.cells if (c.get("from"), c.get("to"), c.get("family") or "") == key), None)
    if found is None:
        return {**base, "state": "not_exercised", "text": "not exercised", "ok": False}
    if found["state"] == "not_exercised":  # the run went, but nothing was measured on the flow
        ok = p.must != "deliver"
        return {**base, **found, "state": "no_traffic", "text": "no traffic (not exercised)", "ok": ok}
    notes = sorted({k.split(":")[1] for k in found.get("blame", {}) if k.startswith(("lost:", "missed:"))})
    notes = notes if found["state"] == "lost" else []
    if not p.routable and found["state"] not in ("ok", "quiet"):  # quiet: as predicted, and passes
        notes.append("not routable, predicted")
    wrong = contradiction(p, found, r)
    text = describe(found) + (f" ({', '.join(notes)})" if notes else "") + (f"; {wrong}" if wrong else "")
    cell = {**base, **found, "text": text, "ok": bool(found["ok"]) if p.must != "report" else None}
    return {**cell, "prediction": wrong} if wrong else cell


def contradiction(p: PathPrediction, found: dict[str, Any], r: RowResult) -> str:
    """How the run contradicts the flow's prediction ("" when it does not): predicted blocked but
    delivered, or predicted routable but lost in a row with no fault (and not by its agents)."""
    delivered, lost = int(found.get("delivered") or 0), int(found.get("lost") or 0)
    if not p.routable and delivered > 0:
        return f"prediction wrong: predicted blocked ({p.why}), delivered {delivered}"
    agents = any(k.endswith(":agent") for k in found.get("blame") or {})
    if p.routable and r.row.fault == "baseline" and found.get("state") == "lost" and lost and not agents:
        return (
            f"prediction wrong: predicted routable ({p.why}), lost {lost} of {found.get('expected')} "
            "with no fault"
        )
    return ""


def _fragment(c: dict[str, Any]) -> str:
    """A failed family in its path's cell: `topology 40 of 40 (broker)`."""
    notes = sorted({k.split(":")[1] for k in c.get("blame", {}) if k.startswith(("lost:", "missed:"))})
    if c["state"] == "lost":
        head = f"{c['family']} {c['lost']} of {c['expected']}"
    elif c["state"] == "delivered":
        head = f"{c['family']} {c['delivered']}"
    else:
        head = c["family"]
    if not c.get("routable", True) and c["state"] in ("lost", "no_traffic"):
        notes.append("not routable, predicted")
    return head + (f" ({', '.join(notes)})" if notes else "")


def _path_cell(preds: list[PathPrediction], r: RowResult) -> dict[str, Any]:
    cell = _measured_cell(preds, r)
    wrong = [f for f, c in cell["families"].items() if c.get("prediction")]
    if wrong:  # the model was wrong on this path: the cell says so and fails
        cell = {**cell, "text": f"{cell['text']}; prediction wrong: {', '.join(wrong)}", "ok": False}
    return cell


def _measured_cell(preds: list[PathPrediction], r: RowResult) -> dict[str, Any]:
    fams = {p.family or p.key: _family_cell(p, r) for p in preds}
    live = [c for c in fams.values() if c["state"] != "not_routable"]
    counts = {k: sum(int(c.get(k) or 0) for c in live) for k in COUNTS}
    if not live:
        return {"state": "not_routable", "text": "not routable (predicted)", "ok": None, "families": fams}
    if all(c["state"] == "not_exercised" for c in live):
        ok = None if all(c["ok"] is None for c in live) else False
        return {"state": "not_exercised", "text": "not exercised", "ok": ok, **counts, "families": fams}
    failed = [c for c in live if c["ok"] is False or (c["ok"] is None and c["state"] in _FAILED)]
    if failed:
        groups = [
            f"{label}: " + ", ".join(_fragment(c) for c in failed if c["state"] == state)
            for state, label in _FAILED.items()
            if any(c["state"] == state for c in failed)
        ]
        state = next(s for s in _FAILED if any(c["state"] == s for c in failed))
        ok = False if any(c["ok"] is False for c in failed) else None
        return {"state": state, "text": "; ".join(groups), "ok": ok, **counts, "families": fams}
    state = "dup" if counts["duplicated"] else "dropped" if counts["dropped"] else "ok"
    text = {"dup": f"ok, dup {counts['duplicated']}", "dropped": f"ok, dropped {counts['dropped']}"}.get(
        state, "ok"
    )
    ok = None if all(c["ok"] is None for c in live) else True
    return {"state": state, "text": text, "ok": ok, **counts, "families": fams}


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


def by_path(preds: list[PathPrediction]) -> dict[str, list[PathPrediction]]:
    """The traffic predictions per path key, in first-seen (family, then group) order."""
    out: dict[str, list[PathPrediction]] = {}
    for p in preds:
        out.setdefault(p.key, []).append(p)
    return out


def _column(key: str, preds: list[PathPrediction]) -> dict[str, Any]:
    musts = [p.must for p in preds]
    must = next((m for m in ("deliver", "not", "report") if m in musts), "none")
    first = next((p for p in preds if p.must != "none"), preds[0])
    return {
        "key": key,
        "path": preds[0].label,
        "must": must,
        "routable": any(p.routable for p in preds if p.must != "none"),  # some family crosses
        "hops": first.hops,
        "why": "\n".join(dict.fromkeys(f"{p.family}: {p.why}" if p.family else p.why for p in preds)),
        "families": [
            {
                "family": p.family,
                "must": p.must,
                "routable": p.routable,
                "why": p.why,
                **({"blocked_by": workload.jsonable(b)} if (b := getattr(p, "blocked_by", None)) else {}),
            }
            for p in preds
        ],
    }


def build(cov: Coverage) -> dict[str, Any]:
    """The matrix as data (the JSON of `bfh validate --json`)."""
    paths = by_path(cov.predictions)
    rows: list[dict[str, Any]] = []
    for r in cov.results:
        cells = {key: _path_cell(preds, r) for key, preds in paths.items()}
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
    code, summary = _outcome(rows)
    wrong = [
        f"{r['key']} / {k} [{fam}]: {fc['prediction']}"
        for r in rows
        for k, c in r["cells"].items()
        for fam, fc in (c.get("families") or {}).items()
        if fc.get("prediction")
    ]
    if wrong and code == 0:
        code = 1  # the harness's own model was wrong: a finding, like a broken promise
    warnings = path_warnings(cov.predictions) + workload.caveats(
        workload.measured(cov.topology, cov.predictions)
    )
    return {
        "topology": cov.topology.name,
        "verdict": {0: "pass", 1: "fail", 2: "incomplete"}[code],
        "exit_code": code,
        "wall_s": round(cov.wall_s, 1),
        "parallel": cov.parallel,
        "budget_s": cov.budget_s,
        "paths": [_column(key, preds) for key, preds in paths.items()],
        "warnings": list(dict.fromkeys(warnings)),
        "prediction": wrong,  # flows whose measurement contradicts their prediction
        "runs": sum(1 for r in rows if r["verdict"] != "not_run"),
        "cells": sum(len(r["cells"]) for r in rows),
        **summary,
        "rows": rows,
    }


def _outcome(rows: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    """The exit code, the failed and untested cells and the failed flows (path x family)."""
    failed = [
        (r["key"], k)
        for r in rows
        for k, c in r["cells"].items()
        if c["ok"] is False and c["state"] not in ("not_exercised", "error")
    ]
    untested = [
        (r["key"], k) for r in rows for k, c in r["cells"].items() if c["state"] in ("not_exercised", "error")
    ]
    flows = [
        f"{r['key']} / {k} [{fam}]"
        for r in rows
        for k, c in r["cells"].items()
        for fam, fc in (c.get("families") or {}).items()
        if fc["ok"] is False and fc["state"] != "not_exercised"
    ]
    code = 1 if failed else 2 if untested else 0
    return code, {
        "failed_cells": [f"{k} / {c}" for k, c in failed],
        "failed_flows": flows,
        "untested_cells": [f"{k} / {c}" for k, c in untested],
    }


def write_json(m: dict[str, Any], out: Path) -> Path:
    return outfile.write_text(out, json.dumps(m, indent=2, default=str))


def write_junit(m: dict[str, Any], out: Path) -> Path:
    """One test case per path x family (classname the fault row, name `<path> [<family>]`) and one
    per row's other promises (`promises`)."""
    labels = {p["key"]: p["path"] for p in m["paths"]}
    suite = ET.Element("testsuite", name=f"bfh validate {m['topology']}")
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    for r in m["rows"]:
        for key, cell in r["cells"].items():
            subs = cell.get("families") or {}
            cases = [(f"{labels.get(key, key)} [{f}]", c) for f, c in subs.items()] if subs else [(key, cell)]
            for name, c in cases:
                if c["state"] == "not_routable":
                    continue
                counts["tests"] += 1
                _case(suite, r, name, c, counts)
    for finding in m.get("prediction") or []:
        counts["tests"] += 1
        counts["failures"] += 1
        where, _, what = finding.partition(": ")
        tc = ET.SubElement(suite, "testcase", classname="prediction", name=where)
        ET.SubElement(tc, "failure", message=f"{where}: {what}").text = what
    for k, v in counts.items():
        suite.set(k, str(v))
    return outfile.write_text(out, ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n")


def _case(suite: ET.Element, r: dict[str, Any], name: str, c: dict[str, Any], counts: dict[str, int]) -> None:
    tc = ET.SubElement(suite, "testcase", classname=r["key"], name=name)
    props = ET.SubElement(tc, "properties")
    for k in ("family", "state", *COUNTS):
        if k in c:
            ET.SubElement(props, "property", name=k, value=str(c[k]))
    if why := (blocked(c) if c.get("family") else ""):
        ET.SubElement(props, "property", name="blocked_by", value=why)
    if r.get("report"):
        ET.SubElement(props, "property", name="report", value=str(r["report"]))
    if c["state"] == "not_exercised":
        counts["skipped"] += 1
        ET.SubElement(tc, "skipped", message=c["text"])
    elif c["ok"] is False:
        counts["failures"] += 1
        f = ET.SubElement(tc, "failure", message=f"{r['key']} / {name}: {c['text']}")
        first = [what(c)] if c.get("family") and "expected" in c else []
        f.text = "\n".join(first + list(r.get("reasons") or [c["text"]]))


def html_matrix(m: dict[str, Any], index: Path) -> dict[str, Any]:
    """The template's view of the matrix: relative report links from the index page, each path's
    families under its heading, and each cell's families in its tooltip."""
    rows = []
    for r in m["rows"]:
        href = (
            os.path.relpath(r["report"], index.parent)
            if r.get("report") and Path(r["report"]).exists()
            else None
        )
        cells = {k: {**c, "title": _title(c)} for k, c in r["cells"].items()}
        rows.append({**r, "href": href, "cells": cells})
    cols = [
        {
            **p,
            "families_text": ", ".join(
                f["family"] + ("" if f["routable"] else " (blocked)")
                for f in p.get("families", [])
                if f["must"] != "none"
            ),
        }
        for p in m["paths"]
    ]
    cols.append({"key": "promises", "path": "other promises"})
    return {**m, "rows": rows, "columns": cols}


def _title(c: dict[str, Any]) -> str:
    fams = [f"{f}: {fc['text']}" for f, fc in (c.get("families") or {}).items()]
    return "\n".join(fams + list(c.get("reasons") or []))
