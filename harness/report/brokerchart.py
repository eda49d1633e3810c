"""The report's brokers over the run (an inline SVG per broker): the connections it had accepted
and the CPU it used, sampled every second (RUN_DIR/broker-usage.jsonl,
harness/contracts/brokerusage.py), with the fault windows shaded. A reconnect storm shows as the
new master's connections climbing while its CPU spikes."""

from __future__ import annotations

from html import escape
from typing import Any

from markupsafe import Markup

from harness.contracts import brokerusage
from harness.contracts.brokerusage import Series

W, H, LEFT, RIGHT, TOP, BOTTOM = 900, 150, 50, 50, 12, 22
CONN, CPU = "#1f77b4", "#d62728"


def broker_usage_section(run_dir: Any, faults: list[dict[str, Any]]) -> Markup | None:
    """One chart per broker, or None when the run sampled none (another backend, an old folder)."""
    data = brokerusage.series(brokerusage.read(run_dir))
    if not data:
        return None
    t0 = min(p[0] for pts in data.values() for p in pts)
    t1 = max(p[0] for pts in data.values() for p in pts)
    top_conns = max((c or 0 for pts in data.values() for _, c, _ in pts), default=0) or 1
    top_cpu = max((u or 0 for pts in data.values() for _, _, u in pts), default=0) or 1
    parts = [
        '<div id="broker-usage"><h2>Brokers: connections and CPU</h2>',
        "<p><small>Per second: the TCP connections each broker had accepted on its connectors "
        f'(<span style="color:{CONN}">solid, left axis</span>) and the cores its JVM used '
        f'(<span style="color:{CPU}">dashed, right axis</span>); one scale for every broker; '
        "shaded: fault windows; gaps: the broker was down.</small></p>",
    ]
    for broker in sorted(data):
        parts.append(_chart(broker, data, (t0, max(t1, t0 + 1)), (top_conns, top_cpu), faults))
    parts.append("</div>")
    return Markup("".join(parts))


def _chart(
    broker: str,
    data: Series,
    span: tuple[float, float],
    tops: tuple[float, float],
    faults: list[dict[str, Any]],
) -> str:
    t0, t1 = span
    top_conns, top_cpu = tops

    def x(t: float) -> float:
        return LEFT + (t - t0) / (t1 - t0) * (W - LEFT - RIGHT)

    def y(v: float, top: float) -> float:
        return H - BOTTOM - v / top * (H - BOTTOM - TOP)

    pts = data[broker]
    out = [f'<svg class="broker-usage" width="{W}" height="{H}" role="img" aria-label="{escape(broker)}">']
    for f in faults:
        s, e = float(f.get("start", t0)), float(f.get("end", t1))
        what = escape(f"{f.get('fault')} {f.get('target')}")
        out.append(
            f'<rect x="{x(s):.1f}" y="{TOP}" width="{max(x(e) - x(s), 1):.1f}" height="{H - BOTTOM - TOP}" '
            f'fill="#f2dede"><title>{what}</title></rect>'
        )
    for i, (colour, top, dash) in enumerate(
        ((CONN, top_conns, ""), (CPU, top_cpu, ' stroke-dasharray="4 3"'))
    ):
        for run in _runs([(t, v[i]) for t, *v in pts]):
            line = " ".join(f"{x(t):.1f},{y(v, top):.1f}" for t, v in run)
            out.append(f'<polyline fill="none" stroke="{colour}"{dash} points="{line}"/>')
    peak_c = max((c or 0 for _, c, _ in pts), default=0)
    peak_u = max((u or 0 for _, _, u in pts), default=0)
    out += [
        f'<text x="{LEFT - 4}" y="{TOP + 8}" font-size="10" text-anchor="end" fill="{CONN}">'
        f"{top_conns:g}</text>",
        f'<text x="{W - RIGHT + 4}" y="{TOP + 8}" font-size="10" fill="{CPU}">{top_cpu:.2f} cores</text>',
        f'<text x="{LEFT}" y="{H - 6}" font-size="11"><tspan font-weight="bold">{escape(broker)}</tspan>: '
        f"peak {peak_c:g} connections, {peak_u:.2f} cores</text>",
        f'<text x="{W - RIGHT}" y="{H - 6}" font-size="10" text-anchor="end">{t1 - t0:.0f} s</text>',
        f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" stroke="#333"/>',
        "</svg>",
    ]
    return "".join(out)


def _runs(points: list[tuple[float, float | None]], gap_s: float = 3.0) -> list[list[tuple[float, float]]]:
    """The points split where a value is unknown or samples are missing (a broker down)."""
    runs: list[list[tuple[float, float]]] = [[]]
    last = None
    for t, v in points:
        if v is None or (last is not None and t - last > gap_s):
            runs.append([])
        if v is not None:
            runs[-1].append((t, v))
        last = t
    return [r for r in runs if r]
