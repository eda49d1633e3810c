"""RUN_DIR/report.html (self-contained: inline CSS and SVG, no script from anywhere else) and
RUN_DIR/summary.md, built from what a reconciled run left on disk: analysis/summary.json,
analysis/messages.parquet, faults.jsonl, agents/*/messages.jsonl and run.json. Never Spark.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from harness.contracts.manifest import atomic_write
from harness.report.brokerchart import broker_usage_section
from harness.report.fleet import fleet_parts
from harness.report.loadsummary import load_section

# RunData and the timeline live in their own modules; their names stay importable from here.
from harness.report.rundata import ReportError, RunData, blame_rows, load_run
from harness.report.timeline import BLAME_COLOURS, _f, timeline_svg

__all__ = [
    "ReportError",
    "RunData",
    "blame_rows",
    "fault_rows",
    "headline",
    "latency_svg",
    "load_run",
    "render_index",
    "render_report",
    "run_headline",
    "timeline_svg",
    "topology_svg",
]

TEMPLATES = Path(__file__).parent.parent / "templates"


def latency_svg(histogram: list[list[int]], width: int = 480, height: int = 200) -> Markup:
    """Histogram of first-receipt latency on a log scale (failover latencies span decades), from
    the summary's quarter-decade bins: [bin, receipts], bin b = [10^(b/4), 10^((b+1)/4)) s."""
    found = {int(b): int(n) for b, n in histogram if n}
    if not found:
        return Markup("<p>no receipts</p>")
    lo_exp, hi_exp = -3, max(-2, math.ceil((max(found) + 1) / 4))
    first = lo_exp * 4
    counts = [0] * ((hi_exp - lo_exp) * 4)
    for b, n in found.items():
        counts[min(max(b - first, 0), len(counts) - 1)] += n
    edges = [10 ** (lo_exp + i / 4) for i in range(len(counts) + 1)]
    left, bottom, top = 40, height - 30, 10
    bw = (width - left - 10) / len(counts)
    peak = max(counts) or 1
    out = [
        f'<svg id="latency" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="latency distribution">'
    ]
    for i, c in enumerate(counts):
        h = c / peak * (bottom - top)
        out.append(
            f'<rect x="{_f(left + i * bw)}" y="{_f(bottom - h)}" width="{_f(bw - 1)}" height="{_f(h)}" '
            f'fill="#1f77b4"><title>{edges[i]:.3g}–{edges[i + 1]:.3g} s: {c}</title></rect>'
        )
    for e in range(lo_exp, hi_exp + 1):
        xx = left + (e - lo_exp) * 4 * bw
        out.append(
            f'<text x="{_f(xx)}" y="{bottom + 14}" font-size="10" text-anchor="middle">{10.0**e:g}s</text>'
        )
    out.append(f'<line x1="{left}" y1="{bottom}" x2="{width - 10}" y2="{bottom}" stroke="#333"/>')
    out.append(f'<text x="{left - 4}" y="{top + 8}" font-size="10" text-anchor="end">{peak}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def topology_svg(topology: dict[str, Any], width: int = 480) -> Markup:
    """Groups as boxes of member brokers, bridges as arrows between groups."""
    groups = topology.get("groups", [])
    if not groups:
        return Markup("<p>no topology recorded</p>")
    box_w, gap = 130, 60
    width = max(width, len(groups) * (box_w + gap) + gap)
    height = 170
    pos = {g["name"]: gap + i * (box_w + gap) for i, g in enumerate(groups)}
    out = [
        f'<svg id="topology" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="topology">',
        '<defs><marker id="arr" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
        '<path d="M0,0 L8,4 L0,8 z" fill="#555"/></marker></defs>',
    ]
    for g in groups:
        gx = pos[g["name"]]
        size = {"standalone": 1, "pair": 2, "trio": 3}.get(g.get("kind", "pair"), 2)
        out.append(f'<rect x="{gx}" y="40" width="{box_w}" height="90" rx="8" fill="#f4f6fb" stroke="#345"/>')
        out.append(
            f'<text x="{gx + box_w / 2}" y="56" font-size="12" text-anchor="middle" font-weight="bold">'
            f"{escape(g['name'])} ({escape(g.get('kind', 'pair'))})</text>"
        )
        for m in range(size):
            out.append(
                f'<rect x="{gx + 10 + m * 58}" y="68" width="52" height="26" rx="4" '
                'fill="#fff" stroke="#789"/>'
                f'<text x="{gx + 36 + m * 58}" y="85" font-size="10" text-anchor="middle">'
                f"{escape(g['name'])}-{m + 1}</text>"
            )
        conns = ", ".join(g.get("connectors", {}))
        out.append(
            f'<text x="{gx + box_w / 2}" y="118" font-size="9" text-anchor="middle">{escape(conns)}</text>'
        )
    for b in topology.get("bridges", []):
        src, dst = b.get("from"), b.get("to")
        if src not in pos or dst not in pos:
            continue
        x1 = pos[src] + (box_w if pos[src] < pos[dst] else 0)
        x2 = pos[dst] + (0 if pos[src] < pos[dst] else box_w)
        y = 80 + (-12 if pos[src] < pos[dst] else 12)
        out.append(
            f'<line x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" stroke="#555" marker-end="url(#arr)"/>'
            f'<text x="{(x1 + x2) / 2}" y="{y - 3}" font-size="9" text-anchor="middle">'
            f"{escape(str(b.get('uri', 'masterslave')))}</text>"
        )
    out.append("</svg>")
    return Markup("".join(out))


# -- the page and the markdown ---------------------------------------------------------------
def _env() -> jinja2.Environment:
    from harness.report.configreport import config_section  # imported deployment files (config:)

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.ChainableUndefined,
        keep_trailing_newline=True,
    )
    env.globals["config_section"] = config_section
    return env


def _fmt(v: Any, digits: int = 3) -> str:
    return "–" if v is None else (f"{v:.{digits}f}" if isinstance(v, float) else str(v))


def fault_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    t0 = (summary.get("time_span") or [0])[0] or 0
    rows = []
    for f in summary.get("faults", []) or []:
        rec = [v for roles in (f.get("recovery_s") or {}).values() for v in roles.values() if v is not None]
        rows.append(
            {
                "id": f.get("fault_id"),
                "fault": f.get("fault"),
                "target": f.get("target"),
                "at_s": (f.get("start") or t0) - t0,
                "duration_s": (f.get("end") or f.get("start") or 0) - (f.get("start") or 0),
                "recovery_s": max(rec) if rec else None,
                "recovery": f.get("recovery_s") or {},
                "anomalies": {
                    k: a.get("count", a) if isinstance(a, dict) else a
                    for k, a in (f.get("anomalies") or {}).items()
                },
                "anomaly_count": f.get("anomaly_count", 0),
                "vacuous": f.get("vacuous", False),
            }
        )
    return rows


def headline(summary: dict[str, Any]) -> dict[str, Any]:
    """The figures validate's table and the index show for one run."""
    d = summary.get("deliveries", {})
    rec = [r["recovery_s"] for r in fault_rows(summary) if r["recovery_s"] is not None]
    return {
        "verdict": summary.get("verdict", "?"),
        "lost": int(d.get("lost", 0)) + int(d.get("missed", 0)),
        "duplicated": int(d.get("duplicated", 0)),
        "dropped": int(summary.get("totals", {}).get("dropped", 0)),
        "recovery_s": max(rec) if rec else None,
    }


def run_headline(run_dir: Path) -> dict[str, Any]:
    """headline() of a run folder, with its broken promises."""
    s = load_run(run_dir).summary
    return {**headline(s), "broken": s.get("broken", [])}


def _files(run_dir: Path) -> list[tuple[str, str]]:
    """(label, relative path) of broker logs and raw data, for links."""
    out: list[tuple[str, str]] = []
    patterns = (
        "brokers/*/broker.log",
        "agents/*/messages.jsonl",
        "agents/*/agent.out",
        "faults.jsonl",
        "run.json",
        "fault-proxy.log",
        "analysis/summary.json",
        "analysis/report.md",
    )
    for pat in patterns:
        for p in sorted(run_dir.glob(pat)):
            rel = p.relative_to(run_dir).as_posix()
            out.append((rel, rel))
    return out


def render_report(run_dir: Path) -> Path:
    """Write RUN_DIR/report.html and RUN_DIR/summary.md; return the html path. The verdict and the
    promise table are harness.verdict's, as summary.json holds them (never decided here)."""
    out = Path(run_dir).resolve() / "report.html"
    md = out.with_name("summary.md")
    try:
        html, text = _render(load_run(run_dir))
    except ReportError:
        _drop_stale(out, md)
        raise
    except Exception as e:  # noqa: BLE001 - a crash on this run's data: one line, no stale report
        _drop_stale(out, md)
        what = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        raise ReportError(f"{out.parent}: the report could not be rendered ({what})") from None
    try:  # each file whole or not at all
        for path, content in ((out, html), (md, text)):
            atomic_write(path, content)
    except OSError as e:
        _drop_stale(out, md)
        raise ReportError(f"{out.parent}: cannot write the report: {e.strerror or e}") from None
    return out


def _drop_stale(*paths: Path) -> None:
    """A report that could not be rendered leaves no older report claiming another verdict."""
    for p in paths:
        with contextlib.suppress(OSError):
            p.unlink(missing_ok=True)


def journeys(run_dir: Path, msg_ids: list[str]) -> dict[str, list[str]]:
    """msg_id -> its journey as `bfh explain RUN_DIR MSG_ID` prints it (harness/verdict/explain.py)."""
    from harness.verdict.explain import explain

    out: dict[str, list[str]] = {}
    for m in msg_ids:
        try:
            out[m] = explain(run_dir, m).lines()
        except Exception as e:  # noqa: BLE001 - one message's journey never costs the report
            out[m] = [f"{m}: no journey ({type(e).__name__}: {e})"[:300]]
    return out


def _render(d: RunData) -> tuple[str, str]:
    s = d.summary
    fleet = fleet_parts(d.run_dir)
    if fleet is not None:  # a fleet's timeline: its controllers and slowest members, not every lane
        d = dataclasses.replace(d, agents={a: d.agents[a] for a in fleet[1] if a in d.agents})
    checks = sorted(s.get("checks") or [], key=lambda c: (c.get("status") != "fail", not c.get("gated")))
    ctx = {
        "s": s,
        "run": d.run,
        "verdict": str(s.get("verdict", "not judged")),
        "checks": checks,
        "broken": s.get("broken", []),
        "head": headline(s),
        "faults": fault_rows(s),
        "timeline": timeline_svg(d),
        "latency": latency_svg((d.summary.get("latency_s") or {}).get("histogram") or []),
        "topology_svg": topology_svg(d.run.get("topology", {})),
        "files": _files(d.run_dir),
        "fmt": _fmt,
        "agents": sorted(d.agents),
        "blamed": list(blame_rows(d.run_dir).values())[:10],
        "journeys": journeys(d.run_dir, [str(m) for m in list(blame_rows(d.run_dir))[:10]]),
        "blame_colours": BLAME_COLOURS,
        "fleet": fleet[0] if fleet else None,
        "fleet_drawn": len(d.agents),
        "broker_usage": broker_usage_section(d.run_dir, d.faults),
        "load": load_section(d.run),
    }
    env = _env()
    return env.get_template("report.html.j2").render(**ctx), env.get_template("report_summary.md.j2").render(
        **ctx
    )


def render_index(
    entries: list[dict[str, Any]], out: Path, title: str, matrix: dict[str, Any] | None = None
) -> Path:
    """An index page linking every run's report; entries carry name, run_dir and headline fields."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for e in entries:
        run_dir = Path(str(e.get("run_dir", "")))
        report = run_dir / "report.html"
        rel = os.path.relpath(report, out.parent) if report.exists() else None
        rows.append({**e, "href": rel})
    html = _env().get_template("report_index.html.j2").render(title=title, rows=rows, fmt=_fmt, matrix=matrix)
    out.write_text(html, encoding="utf-8")
    return out
