"""RUN_DIR/report.html (self-contained: inline CSS and SVG, no script from anywhere else) and
RUN_DIR/summary.md, built from what a reconciled run left on disk: analysis/summary.json,
analysis/messages.parquet, faults.jsonl, agents/*/messages.jsonl and run.json. Never Spark.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from harness.contracts.faultlog import read_windows
from harness.contracts.manifest import EvidenceError, check_kind, run_window, ts_ok
from harness.contracts.msglog import iter_records
from harness.report.fleet import fleet_section

TEMPLATES = Path(__file__).parent.parent / "templates"
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
MAX_MARKERS = 1500  # per anomaly kind drawn on the timeline
MAX_BINS = 2000  # rate bins on the timeline (a bin is 1 s, or wider for a longer run)
ANOMALY_COLOURS = {"lost": "#d62728", "duplicated": "#ff9f1c", "dropped": "#7f7f7f", "missed": "#a50f15"}
BLAME_COLOURS = {
    "agent": "#1f77b4",
    "broker": "#9467bd",
    "fault": "#8c564b",
    "unknown": "#bbbbbb",
    "allowed": "#2ca02c",  # what the contract allows (harness/verdict/blame.py ALLOWED)
}


class ReportError(RuntimeError):
    """The run folder lacks what a report needs (e.g. it was never reconciled)."""


@dataclass
class RunData:
    run_dir: Path
    summary: dict[str, Any]
    run: dict[str, Any]
    faults: list[dict[str, Any]]  # one per fault_id: fault, target, start, end, params
    agents: dict[str, list[dict[str, Any]]]
    messages: list[dict[str, Any]] = field(default_factory=list)  # rows of messages.parquet (few columns)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{path} is missing (was the run reconciled? `bfh reconcile RUN_DIR`)") from None
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}: not JSON ({e})") from None
    return data if isinstance(data, dict) else {}


def load_run(run_dir: Path) -> RunData:
    run_dir = Path(run_dir).resolve()
    if not run_dir.is_dir():
        raise ReportError(f"{run_dir}: no such run folder")
    try:  # regular files only: a FIFO in a log's place would block the report
        for rel in ("analysis/summary.json", "run.json", "faults.jsonl"):
            check_kind(run_dir / rel)
        logs = sorted((run_dir / "agents").glob("*/messages.jsonl"))
        for log in logs:
            check_kind(log, "a message log")
    except EvidenceError as e:
        raise ReportError(str(e)) from None
    summary = _read_json(run_dir / "analysis" / "summary.json")
    run = _read_json(run_dir / "run.json") if (run_dir / "run.json").exists() else {}
    # Only times inside the run's window are drawn (a ts in milliseconds, NaN or inf is a
    # malformed record, counted by the verdict's `evidence` check, not a chart gigabytes wide).
    window = run_window(run)
    windows = [
        {"fault_id": w.fault_id, "fault": w.fault, "target": w.target, "start": w.start, "params": w.params}
        | ({"end": w.end} if ts_ok(w.end, window) else {})
        for w in read_windows(run_dir / "faults.jsonl").windows
        if ts_ok(w.start, window)
    ]
    agents = {log.parent.name: [r for r in iter_records(log) if ts_ok(r.get("ts"), window)] for log in logs}
    messages: list[dict[str, Any]] = []
    parquet = run_dir / "analysis" / "messages.parquet"
    if parquet.exists():
        import pyarrow.parquet as pq

        cols = ["msg_id", "publisher", "state", "first_attempt_ts", "status", "msg_row"]
        messages = pq.read_table(parquet, columns=cols).to_pylist()
    return RunData(run_dir, summary, run, windows, agents, messages)


# -- SVG helpers -------------------------------------------------------------------------------
def _f(x: float) -> str:
    return f"{x:.1f}"


def _nice_step(span: float, ticks: int = 8) -> float:
    raw = max(span / ticks, 1e-9)
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)


def _broker_of(run: dict[str, Any]) -> dict[str, str]:
    """Proxy listen address -> broker name (the agent logs the address it dialled)."""
    out: dict[str, str] = {}
    for lk in run.get("links", []):
        name = str(lk.get("name", ""))
        broker = name.rsplit("-", 1)[0] if "-" in name else name
        listen = str(lk.get("listen", ""))
        out[listen] = broker
        out[listen.split("://")[-1]] = broker
    return out


def timeline_svg(d: RunData, width: int = 960) -> Markup:
    """Send/receive rate per agent, shaded fault windows, anomaly markers, connection lanes."""
    recs = [r for rs in d.agents.values() for r in rs if isinstance(r.get("ts"), (int, float))]
    ts = [float(r["ts"]) for r in recs] + [f[k] for f in d.faults for k in ("start", "end") if k in f]
    if not ts:
        return Markup("<p>no timed records</p>")
    t0, t1 = min(ts), max(ts)
    span = max(t1 - t0, 1.0)
    left, right = 170, 20  # room for the connection lane labels
    plot_w = width - left - right

    def x(t: float) -> float:
        return left + (t - t0) / span * plot_w

    names = sorted(d.agents)
    colour = {a: PALETTE[i % len(PALETTE)] for i, a in enumerate(names)}
    # Rates per second, in bins of a whole second (wider when the run is longer than MAX_BINS s).
    bin_s = max(1.0, math.ceil(span / MAX_BINS))
    n_bins = int(span / bin_s) + 1
    series: dict[tuple[str, str], list[float]] = {}
    for a, rs in d.agents.items():
        for ev in ("sent", "received"):
            counts = [0] * n_bins
            for r in rs:
                if r.get("event") == ev and isinstance(r.get("ts"), (int, float)):
                    counts[min(max(int((float(r["ts"]) - t0) / bin_s), 0), n_bins - 1)] += 1
            if any(counts):
                series[(a, ev)] = [n / bin_s for n in counts]
    peak = max((max(b) for b in series.values()), default=1) or 1
    rate_top, rate_h = 30, 180
    lanes_top = rate_top + rate_h + 40
    lane_h = 18
    lanes = [
        (a, r) for a in names for r in sorted({str(x.get("role")) for x in d.agents[a] if x.get("role")})
    ]
    conn_events: dict[tuple[str, str], list[dict[str, Any]]] = {}  # one pass: a scan per lane was quadratic
    for a in names:
        for r in d.agents[a]:
            if r.get("event") in ("connected", "disconnected") and r.get("role"):
                conn_events.setdefault((a, str(r.get("role"))), []).append(r)
    height = lanes_top + lane_h * len(lanes) + 50
    out: list[str] = [
        f'<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="run timeline">'
    ]
    # Fault windows, shaded over the whole height, labelled on top.
    for i, f in enumerate(d.faults):
        s, e = f.get("start", t0), f.get("end", t1)
        label = f"{f.get('fault')} {f.get('target')}"
        new_master = (f.get("params") or {}).get("new_master")
        if new_master:
            label += f" → {new_master}"
        out.append(
            f'<rect class="fault" x="{_f(x(s))}" y="{rate_top}" width="{_f(max(x(e) - x(s), 2))}" '
            f'height="{height - rate_top - 30}" fill="#d62728" fill-opacity="0.12">'
            f"<title>{escape(f.get('fault_id'))}: {escape(label)} ({e - s:.1f} s)</title></rect>"
        )
        out.append(
            f'<text x="{_f(x(s) + 2)}" y="{rate_top - 4 - 10 * (i % 2)}" font-size="10" fill="#a00">'
            f"{escape(label)}</text>"
        )
    # Axes and grid.
    step = _nice_step(span)
    tick = 0.0
    while tick <= span + 1e-9:
        xx = x(t0 + tick)
        out.append(f'<line x1="{_f(xx)}" y1="{rate_top}" x2="{_f(xx)}" y2="{height - 30}" stroke="#eee"/>')
        out.append(
            f'<text x="{_f(xx)}" y="{height - 16}" font-size="10" text-anchor="middle">{tick:g}s</text>'
        )
        tick += step
    base = rate_top + rate_h
    out.append(f'<line x1="{left}" y1="{base}" x2="{width - right}" y2="{base}" stroke="#333"/>')
    out.append(f'<line x1="{left}" y1="{rate_top}" x2="{left}" y2="{base}" stroke="#333"/>')
    out.append(f'<text x="{left - 6}" y="{rate_top + 8}" font-size="10" text-anchor="end">{peak:g}/s</text>')
    out.append(f'<text x="{left - 6}" y="{base}" font-size="10" text-anchor="end">0</text>')
    legend_x = left + 8
    for (a, ev), bins in series.items():
        pts = " ".join(
            f"{_f(x(t0 + (i + 0.5) * bin_s))},{_f(base - v / peak * rate_h)}" for i, v in enumerate(bins)
        )
        dash = "" if ev == "sent" else ' stroke-dasharray="5,3"'
        out.append(
            f'<polyline class="rate" points="{pts}" fill="none" stroke="{colour[a]}" '
            f'stroke-width="1.5"{dash}>'
            f"<title>{escape(a)} {ev} per second</title></polyline>"
        )
        out.append(
            f'<text x="{legend_x}" y="{rate_top + 14}" font-size="10" fill="{colour[a]}">'
            f"{'—' if ev == 'sent' else '- -'} {escape(a)} {ev}/s</text>"
        )
        legend_x += 150
    # Anomaly markers at send time, just under the rate axis.
    marks: Counter[str] = Counter()
    blamed = blame_rows(d.run_dir)
    for m in d.messages:
        kind = "dropped" if m.get("state") == "dropped" else m.get("status")
        if kind in ANOMALY_COLOURS and m.get("first_attempt_ts"):
            if kind == "dropped" and not m.get("msg_row"):
                continue
            marks[kind] += 1
            if marks[kind] > MAX_MARKERS:  # the legend still counts them; the page stays light
                continue
            xx = x(float(m["first_attempt_ts"]))
            bl = blamed.get(str(m.get("msg_id")))  # the mark's outline: whose fault (blame.parquet)
            edge = f' stroke="{BLAME_COLOURS.get(bl["blame"], "#000")}" stroke-width="2"' if bl else ""
            why = f" — blame {bl['blame']}: {'; '.join(bl['evidence'][:2])}" if bl else ""
            out.append(
                f'<path class="anomaly {kind}" d="M{_f(xx)},{base + 4} l-4,8 h8 z" '
                f'fill="{ANOMALY_COLOURS[kind]}"{edge}><title>{kind}: {escape(m.get("msg_id"))}'
                f"{escape(why)}</title></path>"
            )
    # Connection lanes: which broker each agent role was on, and when it was disconnected.
    brokers = _broker_of(d.run)
    seen = {
        brokers.get(str(r.get("broker")), str(r.get("broker")))
        for rs in d.agents.values()
        for r in rs
        if r.get("event") == "connected"
    }
    bcolour = {
        b: PALETTE[(i + 3) % len(PALETTE)] for i, b in enumerate(sorted(seen))
    }  # only brokers agents used
    for li, (a, role) in enumerate(lanes):
        y = lanes_top + li * lane_h
        label = f"{a}:{role.replace('subscriber:', 'sub:')}"
        if len(label) > 30:  # the label column is `left` px wide; keep the distinctive tail
            label = "…" + label[-29:]
        out.append(
            f'<text x="{left - 4}" y="{y + 12}" font-size="9" text-anchor="end">'
            f"<title>{escape(a)}:{escape(role)}</title>{escape(label)}</text>"
        )
        cur: tuple[float, str] | None = None
        evs = conn_events.get((a, role), [])
        for r in evs + [{"event": "end", "ts": t1}]:
            if cur is not None:
                s, b = cur
                out.append(
                    f'<rect class="conn" x="{_f(x(s))}" y="{y + 2}" '
                    f'width="{_f(max(x(float(r["ts"])) - x(s), 1))}" height="{lane_h - 4}" '
                    f'fill="{bcolour.get(b, "#999")}">'
                    f"<title>{escape(a)} {escape(role)} on {escape(b)}</title></rect>"
                )
                cur = None
            if r.get("event") == "connected":
                b = brokers.get(str(r.get("broker")), str(r.get("broker")))
                cur = (float(r["ts"]), b)
            elif r.get("event") == "disconnected":
                xx = x(float(r["ts"]))
                out.append(
                    f'<line x1="{_f(xx)}" y1="{y}" x2="{_f(xx)}" y2="{y + lane_h}" '
                    'stroke="#000" stroke-width="0.6"/>'
                )
    ly = height - 4
    lx = left
    for b, c in bcolour.items():
        out.append(f'<rect x="{lx}" y="{ly - 8}" width="10" height="8" fill="{c}"/>')
        out.append(f'<text x="{lx + 13}" y="{ly}" font-size="10">on {escape(b)}</text>')
        lx += 110
    for k, n in marks.items():
        out.append(f'<path d="M{lx + 4},{ly - 9} l-4,8 h8 z" fill="{ANOMALY_COLOURS[k]}"/>')
        out.append(f'<text x="{lx + 12}" y="{ly}" font-size="10">{k} ({n})</text>')
        lx += 110
    out.append("</svg>")
    return Markup("".join(out))


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


def blame_rows(run_dir: Path) -> dict[str, dict[str, Any]]:
    """msg_id -> its first anomalous delivery's blame row (analysis/blame.parquet, harness.verdict)."""
    from harness.verdict import blame

    out: dict[str, dict[str, Any]] = {}
    for r in blame.read(run_dir, columns=["msg_id", "status", "blame", "evidence"]):
        out.setdefault(str(r["msg_id"]), r)
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
    try:  # each file whole or not at all: a temporary name in the same folder, then replaced
        for path, content in ((out, html), (md, text)):
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            try:
                tmp.write_text(content, encoding="utf-8")
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
    except OSError as e:
        _drop_stale(out, md)
        raise ReportError(f"{out.parent}: cannot write the report: {e.strerror or e}") from None
    return out


def _drop_stale(*paths: Path) -> None:
    """A report that could not be rendered leaves no older report claiming another verdict."""
    for p in paths:
        with contextlib.suppress(OSError):
            p.unlink(missing_ok=True)


def _render(d: RunData) -> tuple[str, str]:
    s = d.summary
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
        "blame_colours": BLAME_COLOURS,
        "fleet": fleet_section(d.run_dir),
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
