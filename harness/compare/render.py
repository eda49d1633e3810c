"""A comparison on the terminal (a rich table), as JSON and as JUnit XML (one test case per entry
and measure, and per entry and promise; a regression is a failure)."""

from __future__ import annotations

import io
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness.compare.results import BETTER, FEW, WORSE, Comparison, MeasureRow, PromiseRow
from harness.contracts.manifest import atomic_write
from harness.contracts.scorecard import MEASURES, base_name

COLOURS = {WORSE: "bold red", BETTER: "green", FEW: "yellow"}


def unit(measure: str) -> str:
    m = MEASURES.get(base_name(measure))
    return "" if m is None or m.is_count else f" {m.unit}"


def label(m: MeasureRow) -> str:
    """`recovery_s (s, 3 roles)`: the base name, its unit, how many roles it gathers."""
    parts = [u] if (u := unit(m.measure).strip()) else []
    roles = [n for n in m.names if "[" in n]
    if roles:
        parts.append(f"{len(roles)} role{'s' if len(roles) > 1 else ''}")
    return m.measure + (f" ({', '.join(parts)})" if parts else "")


def num(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "–"
    if math.isinf(x):
        return "+inf" if x > 0 else "-inf"
    text = f"{x:+.3g}" if signed else f"{x:.3g}"
    return text


def difference(m: MeasureRow) -> str:
    """`+1.2 [+0.6, +2.1]` (the Hodges-Lehmann shift and its interval), `–` when untested."""
    if m.shift is None:
        return "–"
    if m.ci is None:
        return num(m.shift, True)
    return f"{num(m.shift, True)} [{num(m.ci[0], True)}, {num(m.ci[1], True)}]"


def side(median: float | None, p95: float | None) -> str:
    return f"{num(median)} / {num(p95)}"


def table(c: Comparison, entry: str) -> Table:
    """One entry's measures (median / p95 of every sample; difference: NEW - OLD per round)."""
    t = Table(title=Text(entry, "bold"), title_justify="left")
    for col in ("measure", "old median / p95", "new median / p95", "difference [CI]", "tolerance", "verdict"):
        t.add_column(col)
    for m in c.measures:
        if m.entry != entry:
            continue
        t.add_row(
            Text(label(m)),
            side(m.old.median, m.old.p95),
            side(m.new.median, m.new.p95),
            difference(m),
            num(m.tolerance, True),
            Text(
                m.verdict + (f" ({m.rounds_needed} needed)" if m.rounds_needed else ""),
                COLOURS.get(m.verdict, ""),
            ),
        )
    return t


def promise_lines(c: Comparison) -> list[tuple[str, str]]:
    """(style, line) for the promises worth a line: newly broken, newly kept, worse, better, too few."""
    out = []
    for p in c.promises:
        if p.verdict == WORSE:
            out.append(("bold red", f"worse: {p.entry} {p.text()}"))
        elif p.newly_broken:
            out.append(("red", f"newly broken: {p.entry} {p.text()}"))
        if p.newly_kept or p.verdict == BETTER:
            out.append(("green", f"{'newly kept' if p.newly_kept else 'better'}: {p.entry} {p.text()}"))
        if p.verdict == FEW:
            out.append(
                ("yellow", f"not enough rounds: {p.entry} {p.text()} ({p.rounds_needed} per side needed)")
            )
    return out


def print_comparison(c: Comparison, console: Console) -> None:
    for name, s in (("OLD", c.old), ("NEW", c.new)):
        load = s.get("load_avg_max")
        console.print(
            f"{name}: {s.get('path') or s.get('source')} (agent {s.get('agent_version') or '-'}, "
            f"{s.get('rounds')} rounds, harness {s.get('harness_version') or '-'}"
            + (f", load average up to {load:.1f})" if load is not None else ")"),
            soft_wrap=True,
            highlight=False,
            markup=False,
        )
        if s.get("unsealed"):
            console.print(
                Text(
                    f"note: {name}: {s['unsealed']} run folder(s) with no manifest.json: not checked",
                    "yellow",
                ),
                soft_wrap=True,
            )
    if c.problems:
        for p in c.problems:
            console.print(Text(f"cannot compare: {p}", "red"), soft_wrap=True)
        return
    for entry in dict.fromkeys(m.entry for m in c.measures):
        console.print(table(c, entry))
    lines = promise_lines(c)
    console.print("promises: " + ("" if lines else "none newly broken or kept"), highlight=False)
    for style, line in lines:
        console.print(Text("  " + line, style), soft_wrap=True)
    if any(m.ci and m.confidence for m in c.measures) or any(p.p_worse is not None for p in c.promises):
        console.print(
            f"{c.family} test(s) share 95 % (Bonferroni): each worse/better at p <= {c.level:.2g} one-sided; "
            f"intervals at {100 * (1 - 2 * c.level):.4g} % two-sided (docs/compare.md)",
            highlight=False,
            markup=False,
        )
    if c.load_note:
        console.print(Text(f"note: {c.load_note}", "yellow"), soft_wrap=True)
    style = "bold red" if c.regressions else "yellow" if c.too_few else "green"
    console.print(Text(c.summary(), style), soft_wrap=True)


def render_text(c: Comparison, width: int = 160) -> str:
    """The terminal output as plain text (for a pytest report or a log)."""
    console = Console(file=io.StringIO(), width=width, record=True, color_system=None)
    print_comparison(c, console)
    return console.export_text()


def write_json(c: Comparison, path: Path) -> Path:
    atomic_write(path, json.dumps(c.to_dict(), indent=1) + "\n")
    return path


def _case(suite: ET.Element, classname: str, name: str, verdict: str, message: str, body: str) -> None:
    case = ET.SubElement(suite, "testcase", classname=classname, name=name, time="0")
    if verdict == WORSE:
        ET.SubElement(case, "failure", message=message, type="regression").text = body
    elif verdict == FEW:
        ET.SubElement(case, "skipped", message=message)
    out = ET.SubElement(case, "system-out")
    out.text = body


def junit(c: Comparison) -> str:
    suite = ET.Element("testsuite", name="bfh compare")
    if c.problems:
        case = ET.SubElement(suite, "testcase", classname="bfh compare", name="inputs", time="0")
        ET.SubElement(case, "error", message="could not compare", type="inputs").text = "\n".join(c.problems)
    for m in c.measures:
        body = (
            f"old median/p95 {side(m.old.median, m.old.p95)} ({len(m.old.rounds)} rounds), new "
            f"{side(m.new.median, m.new.p95)} ({len(m.new.rounds)} rounds); difference {difference(m)}; "
            f"tolerance {num(m.tolerance, True)} ({m.tolerance_text}); {m.verdict}: {m.why}"
        )
        _case(suite, m.entry, m.measure, m.verdict, f"{m.measure}: {m.verdict}", body)
    for p in c.promises:
        _case(
            suite, p.entry, f"promise {p.promise}", p.verdict, f"{p.promise}: {p.verdict}", _promise_body(p)
        )
    suite.set("tests", str(len(suite.findall("testcase"))))
    suite.set("failures", str(len(suite.findall("testcase/failure"))))
    suite.set("errors", str(len(suite.findall("testcase/error"))))
    suite.set("skipped", str(len(suite.findall("testcase/skipped"))))
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def _promise_body(p: PromiseRow) -> str:
    ps = f"; p worse {p.p_worse:.3g}" if p.p_worse is not None else ""
    return f"{p.text()}; {p.verdict}{ps}"


def write_junit(c: Comparison, path: Path) -> Path:
    atomic_write(path, junit(c))
    return path
