"""The report's fleet views (report.html, a fleet run only): aggregates first — the recovery-time
distribution, connections per broker over time, deliveries per agent — then per-agent detail
folded away (<details>). Figures from harness/verdict/checks/fleetview.py, as the verdict's."""

from __future__ import annotations

from collections import Counter
from html import escape
from pathlib import Path

from markupsafe import Markup

from harness.verdict.checks.fleetview import BUCKET_S, FleetView, Recovery
from harness.verdict.view import RunView, VerdictError

W, H, LEFT, BOTTOM = 900, 180, 50, 24
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2")


#: members named in the report (the slowest) and drawn on its timeline beside the controllers
SLOWEST = 10


def fleet_section(run_dir: Path) -> Markup | None:
    """The fleet views, or None when the run is not a fleet (or cannot be read)."""
    parts = fleet_parts(run_dir)
    return None if parts is None else parts[0]


def fleet_parts(run_dir: Path) -> tuple[Markup, list[str]] | None:
    """The fleet views and the agents the report's timeline should draw (the controllers and the
    slowest members: a lane per role of a thousand members would be megabytes no one reads), or
    None when the run is not a fleet (or cannot be read)."""
    try:
        f = FleetView.of(RunView.load(run_dir))
    except (VerdictError, OSError, ValueError):
        return None
    if f is None:
        return None
    slowest = f.slowest(SLOWEST)
    parts = [
        _aggregate(f),
        "<h3>Recovery-time distribution</h3>",
        f'<div id="fleet-recovery">{_histogram(f.took(), 0.5, "s after the fault began", "roles")}</div>',
        _slowest(slowest),
        "<h3>Connections per broker over time</h3>",
        "<p><small>Per second: connections the fault proxy accepted per broker (solid), the "
        "brokers' own connection advisories (dashed), attempts refused before the proxy "
        "(grey); shaded: fault windows.</small></p>",
        f'<div id="fleet-connections">{_connections(f)}</div>',
        "<h3>Deliveries per agent</h3>",
        _histogram([float(n) for n in f.deliveries.values()], None, "deliveries", "agents"),
        _details(f),
    ]
    members = set(f.members)
    controllers = sorted(a for a in f.v.agents if a not in members)
    return Markup("\n".join(parts)), controllers + sorted(r.agent for r in slowest)


def _aggregate(f: FleetView) -> str:
    """The fleet at a glance: recovery p50/p95/max, the storm's peak, when every member was back."""
    d = f.distribution()
    never = f", {d['never']} never back" if d.get("never") else ""
    peak, at = _storm_peak(f)
    back = [
        f"{escape(w.fault_id)}: {'some never' if s is None else f'{s:.1f} s after its end'}"
        for w, s in f.all_back()
    ]
    rows = [
        ("members", f"{len(f.members)} ({f.roles} roles)"),
        ("recovery after the fault began", f"p50 {d.get('p50', '-')} s, p95 {d.get('p95', '-')} s, "
         f"max {d.get('max', '-')} s over {d['n']} roles{never}"),
        ("storm peak", f"{peak} reconnects/s at the brokers (accepted + refused; the busiest second "
         f"after a fault began: {at:+.0f} s from its start)"),
        ("every member back", "; ".join(back) or "-"),
        ("deliveries per member", f"median {f.median_deliveries():g}"),
    ]  # fmt: skip
    body = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<h2>Fleet: {len(f.members)} agents</h2><table id="fleet-aggregate">{body}</table>'


def _storm_peak(f: FleetView) -> tuple[int, float]:
    """(connection attempts in the busiest whole second after a fault began, seconds from its
    start): the storm, not the fleet's start-up, which may well be busier."""
    if not f.windows:
        return 0, 0.0
    start = min(w.start for w in f.windows)
    per_s: Counter[int] = Counter()
    for bucket, n in f.attempts.items():
        if bucket * BUCKET_S >= start:
            per_s[int((bucket * BUCKET_S - start) // 1)] += n
    if not per_s:
        return 0, 0.0
    sec, n = max(per_s.items(), key=lambda kv: (kv[1], -kv[0]))
    return n, float(sec)


def _axis_text(x: float, y: float, text: str, anchor: str = "middle") -> str:
    return f'<text x="{x:.0f}" y="{y:.0f}" font-size="10" text-anchor="{anchor}">{escape(text)}</text>'


def _histogram(xs: list[float], width: float | None, xlabel: str, ylabel: str) -> str:
    if not xs:
        return "<p>nothing to draw</p>"
    lo, hi = min(xs), max(xs)
    step = width or max((hi - lo) / 30, 1.0)
    bins: Counter[int] = Counter(int((x - lo) // step) for x in xs)
    n = max(bins) + 1
    top = max(bins.values())
    bw = (W - LEFT - 10) / n
    out = [f'<svg width="{W}" height="{H}" class="fleet">']
    for i in range(n):
        h = bins.get(i, 0) / top * (H - BOTTOM - 10)
        out.append(
            f'<rect x="{LEFT + i * bw:.1f}" y="{H - BOTTOM - h:.1f}" width="{max(bw - 1, 1):.1f}" '
            f'height="{h:.1f}" fill="#1f77b4"><title>{lo + i * step:g}–{lo + (i + 1) * step:g}: '
            f"{bins.get(i, 0)} {ylabel}</title></rect>"
        )
    out.append(_axis_text(LEFT, H - 8, f"{lo:.4g}", "start"))
    out.append(_axis_text(W - 10, H - 8, f"{lo + n * step:.4g} {xlabel}", "end"))
    out.append(_axis_text(LEFT - 4, 14, f"{top} {ylabel}", "end"))
    out.append("</svg>")
    return "".join(out)


def _slowest(slowest: list[Recovery]) -> str:
    rows = "".join(
        f"<tr><td><a href='agents/{escape(r.agent)}/messages.jsonl'>{escape(r.agent)}</a></td>"
        f"<td>{escape(r.role)}</td><td>{escape(r.fault)}</td>"
        f"<td class='n'>{'never' if r.took_s is None else f'{r.took_s:.2f}'}</td>"
        f"<td><small>lost {r.lost_ts:.3f}, back {'-' if r.back_ts is None else f'{r.back_ts:.3f}'}"
        "</small></td></tr>"
        for r in slowest
    )
    return (
        f"<h3>The {len(slowest)} slowest members</h3><table id='fleet-slowest'><tr><th>member</th>"
        "<th>role</th><th>fault</th><th>back after (s)</th>"
        f"<th>evidence (messages.jsonl ts: the role lost, then back)</th></tr>{rows}</table>"
    )


def _connections(f: FleetView) -> str:
    series: list[tuple[str, Counter[int], str]] = []
    for i, (b, c) in enumerate(sorted(f.proxy_accepts.items())):
        per_s: Counter[int] = Counter()
        for k, n in c.items():
            per_s[int(k * BUCKET_S)] += n
        series.append((f"{b} (proxy)", per_s, COLOURS[i % len(COLOURS)]))
    for i, (b, c) in enumerate(sorted(f.broker_connections.items())):
        series.append((f"{b} (broker)", c, COLOURS[i % len(COLOURS)] + '" stroke-dasharray="4 3'))
    refused: Counter[int] = Counter()
    for k, n in f.refused.items():
        refused[int(k * BUCKET_S)] += n
    series.append(("refused", refused, "#999999"))
    secs = [s for _, c, _ in series for s in c]
    if not secs:
        return "<p>no connection counts (a real Toxiproxy keeps none; no witness records)</p>"
    t0, t1 = min(secs), max(secs) + 1
    top = max(max(c.values(), default=0) for _, c, _ in series) or 1

    def x(t: float) -> float:
        return LEFT + (t - t0) / max(t1 - t0, 1) * (W - LEFT - 10)

    def y(n: float) -> float:
        return H - BOTTOM - n / top * (H - BOTTOM - 10)

    out = [f'<svg width="{W}" height="{H + 16 * len(series)}" class="fleet">']
    for w in f.windows:
        end = w.end if w.end is not None else t1
        out.append(
            f'<rect x="{x(w.start):.1f}" y="10" width="{max(x(end) - x(w.start), 1):.1f}" '
            f'height="{H - BOTTOM - 10}" fill="#f2dede"><title>{escape(w.fault_id)}</title></rect>'
        )
    for i, (label, c, colour) in enumerate(series):
        pts = " ".join(f"{x(s):.1f},{y(c.get(s, 0)):.1f}" for s in range(t0, t1))
        out.append(f'<polyline fill="none" stroke="{colour}" points="{pts}"/>')
        ly = H + 12 * (i + 1)
        out.append(f'<line x1="{LEFT}" x2="{LEFT + 20}" y1="{ly - 3}" y2="{ly - 3}" stroke="{colour}"/>')
        out.append(_axis_text(LEFT + 26, ly, label, "start"))
    out.append(_axis_text(LEFT - 4, 14, f"{top}/s", "end"))
    out.append(_axis_text(W - 10, H - 8, f"{t1 - t0} s", "end"))
    out.append("</svg>")
    return "".join(out)


def _details(f: FleetView) -> str:
    back: dict[str, list[str]] = {}
    for r in f.recoveries:
        took = "never" if r.took_s is None else f"{r.took_s:.2f} s"
        back.setdefault(r.agent, []).append(f"{escape(r.role)}: {took}")
    rows = "".join(
        f"<tr><td>{escape(a)}</td><td class='n'>{f.deliveries.get(a, 0)}</td>"
        f"<td><small>{'; '.join(back.get(a, [])) or '-'}</small></td></tr>"
        for a in f.members
    )
    return (
        f'<details id="fleet-members"><summary>Per member ({len(f.members)})</summary>'
        "<table><tr><th>agent</th>"
        f"<th>deliveries</th><th>recovery per role (after the fault began)</th></tr>{rows}</table>"
        "</details>"
    )
