"""The report's run timeline (an inline SVG): send/receive rate per agent, shaded fault windows,
anomaly markers (outlined by their blame) and one connection lane per agent role."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from harness.report.rundata import RunData, blame_rows

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
Lane = tuple[str, str]  # (agent, role)


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


@dataclass(frozen=True)
class _Frame:
    """The drawing's geometry: time t0..t1 maps onto x in [left, width - right]."""

    t0: float
    t1: float
    width: int
    height: int
    left: int = 170  # room for the connection lane labels
    right: int = 20
    rate_top: int = 30
    rate_h: int = 180
    lane_h: int = 18

    @property
    def span(self) -> float:
        return max(self.t1 - self.t0, 1.0)

    @property
    def base(self) -> int:
        return self.rate_top + self.rate_h

    @property
    def lanes_top(self) -> int:
        return self.base + 40

    def x(self, t: float) -> float:
        return self.left + (t - self.t0) / self.span * (self.width - self.left - self.right)


def _rates(d: RunData, t0: float, span: float) -> tuple[dict[tuple[str, str], list[float]], float]:
    """Rates per second, in bins of a whole second (wider when the run is longer than MAX_BINS s)."""
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
    return series, bin_s


def _lanes(d: RunData, names: list[str]) -> tuple[list[Lane], dict[Lane, list[dict[str, Any]]]]:
    lanes = [
        (a, r) for a in names for r in sorted({str(x.get("role")) for x in d.agents[a] if x.get("role")})
    ]
    conn_events: dict[Lane, list[dict[str, Any]]] = {}  # one pass: a scan per lane was quadratic
    for a in names:
        for r in d.agents[a]:
            if r.get("event") in ("connected", "disconnected") and r.get("role"):
                conn_events.setdefault((a, str(r.get("role"))), []).append(r)
    return lanes, conn_events


def _fault_windows(fr: _Frame, faults: list[dict[str, Any]]) -> list[str]:
    """Fault windows, shaded over the whole height, labelled on top."""
    out: list[str] = []
    for i, f in enumerate(faults):
        s, e = f.get("start", fr.t0), f.get("end", fr.t1)
        label = f"{f.get('fault')} {f.get('target')}"
        new_master = (f.get("params") or {}).get("new_master")
        if new_master:
            label += f" → {new_master}"
        out.append(
            f'<rect class="fault" x="{_f(fr.x(s))}" y="{fr.rate_top}" '
            f'width="{_f(max(fr.x(e) - fr.x(s), 2))}" '
            f'height="{fr.height - fr.rate_top - 30}" fill="#d62728" fill-opacity="0.12">'
            f"<title>{escape(f.get('fault_id'))}: {escape(label)} ({e - s:.1f} s)</title></rect>"
        )
        out.append(
            f'<text x="{_f(fr.x(s) + 2)}" y="{fr.rate_top - 4 - 10 * (i % 2)}" font-size="10" fill="#a00">'
            f"{escape(label)}</text>"
        )
    return out


def _axes(fr: _Frame, peak: float) -> list[str]:
    """Axes and grid."""
    out: list[str] = []
    step = _nice_step(fr.span)
    tick = 0.0
    while tick <= fr.span + 1e-9:
        xx = fr.x(fr.t0 + tick)
        out.append(
            f'<line x1="{_f(xx)}" y1="{fr.rate_top}" x2="{_f(xx)}" y2="{fr.height - 30}" stroke="#eee"/>'
        )
        out.append(
            f'<text x="{_f(xx)}" y="{fr.height - 16}" font-size="10" text-anchor="middle">{tick:g}s</text>'
        )
        tick += step
    left, base = fr.left, fr.base
    out.append(f'<line x1="{left}" y1="{base}" x2="{fr.width - fr.right}" y2="{base}" stroke="#333"/>')
    out.append(f'<line x1="{left}" y1="{fr.rate_top}" x2="{left}" y2="{base}" stroke="#333"/>')
    out.append(
        f'<text x="{left - 6}" y="{fr.rate_top + 8}" font-size="10" text-anchor="end">{peak:g}/s</text>'
    )
    out.append(f'<text x="{left - 6}" y="{base}" font-size="10" text-anchor="end">0</text>')
    return out


def _rate_lines(
    fr: _Frame, series: dict[tuple[str, str], list[float]], bin_s: float, colour: dict[str, str], peak: float
) -> list[str]:
    out: list[str] = []
    legend_x = fr.left + 8
    for (a, ev), bins in series.items():
        pts = " ".join(
            f"{_f(fr.x(fr.t0 + (i + 0.5) * bin_s))},{_f(fr.base - v / peak * fr.rate_h)}"
            for i, v in enumerate(bins)
        )
        dash = "" if ev == "sent" else ' stroke-dasharray="5,3"'
        out.append(
            f'<polyline class="rate" points="{pts}" fill="none" stroke="{colour[a]}" '
            f'stroke-width="1.5"{dash}>'
            f"<title>{escape(a)} {ev} per second</title></polyline>"
        )
        out.append(
            f'<text x="{legend_x}" y="{fr.rate_top + 14}" font-size="10" fill="{colour[a]}">'
            f"{'—' if ev == 'sent' else '- -'} {escape(a)} {ev}/s</text>"
        )
        legend_x += 150
    return out


def _anomaly_marks(fr: _Frame, d: RunData) -> tuple[list[str], Counter[str]]:
    """Anomaly markers at send time, just under the rate axis."""
    out: list[str] = []
    marks: Counter[str] = Counter()
    blamed = blame_rows(d.run_dir)
    for m in d.messages:
        kind = "dropped" if m.get("state") == "dropped" else m.get("status")
        if kind not in ANOMALY_COLOURS or not m.get("first_attempt_ts"):
            continue
        if kind == "dropped" and not m.get("msg_row"):
            continue
        marks[kind] += 1
        if marks[kind] > MAX_MARKERS:  # the legend still counts them; the page stays light
            continue
        xx = fr.x(float(m["first_attempt_ts"]))
        bl = blamed.get(str(m.get("msg_id")))  # the mark's outline: whose fault (blame.parquet)
        edge = f' stroke="{BLAME_COLOURS.get(bl["blame"], "#000")}" stroke-width="2"' if bl else ""
        why = f" — blame {bl['blame']}: {'; '.join(bl['evidence'][:2])}" if bl else ""
        out.append(
            f'<path class="anomaly {kind}" d="M{_f(xx)},{fr.base + 4} l-4,8 h8 z" '
            f'fill="{ANOMALY_COLOURS[kind]}"{edge}><title>{kind}: {escape(m.get("msg_id"))}'
            f"{escape(why)}</title></path>"
        )
    return out, marks


def _lane_label(fr: _Frame, a: str, role: str, y: int) -> str:
    label = f"{a}:{role.replace('subscriber:', 'sub:')}"
    if len(label) > 30:  # the label column is `left` px wide; keep the distinctive tail
        label = "…" + label[-29:]
    return (
        f'<text x="{fr.left - 4}" y="{y + 12}" font-size="9" text-anchor="end">'
        f"<title>{escape(a)}:{escape(role)}</title>{escape(label)}</text>"
    )


def _lane(
    fr: _Frame,
    lane: Lane,
    y: int,
    evs: list[dict[str, Any]],
    brokers: dict[str, str],
    bcolour: dict[str, str],
) -> list[str]:
    """One lane: which broker the role was on (a bar per connection), a tick at each disconnect."""
    a, role = lane
    out = [_lane_label(fr, a, role, y)]
    cur: tuple[float, str] | None = None
    for r in evs + [{"event": "end", "ts": fr.t1}]:
        if cur is not None:
            s, b = cur
            out.append(
                f'<rect class="conn" x="{_f(fr.x(s))}" y="{y + 2}" '
                f'width="{_f(max(fr.x(float(r["ts"])) - fr.x(s), 1))}" height="{fr.lane_h - 4}" '
                f'fill="{bcolour.get(b, "#999")}">'
                f"<title>{escape(a)} {escape(role)} on {escape(b)}</title></rect>"
            )
            cur = None
        if r.get("event") == "connected":
            b = brokers.get(str(r.get("broker")), str(r.get("broker")))
            cur = (float(r["ts"]), b)
        elif r.get("event") == "disconnected":
            xx = fr.x(float(r["ts"]))
            out.append(
                f'<line x1="{_f(xx)}" y1="{y}" x2="{_f(xx)}" y2="{y + fr.lane_h}" '
                'stroke="#000" stroke-width="0.6"/>'
            )
    return out


def _connection_lanes(
    fr: _Frame, d: RunData, lanes: list[Lane], conn_events: dict[Lane, list[dict[str, Any]]]
) -> tuple[list[str], dict[str, str]]:
    """Connection lanes: which broker each agent role was on, and when it was disconnected."""
    brokers = _broker_of(d.run)
    seen = {
        brokers.get(str(r.get("broker")), str(r.get("broker")))
        for rs in d.agents.values()
        for r in rs
        if r.get("event") == "connected"
    }
    bcolour = {b: PALETTE[(i + 3) % len(PALETTE)] for i, b in enumerate(sorted(seen))}  # only brokers used
    out: list[str] = []
    for li, lane in enumerate(lanes):
        y = fr.lanes_top + li * fr.lane_h
        out += _lane(fr, lane, y, conn_events.get(lane, []), brokers, bcolour)
    return out, bcolour


def _legend(fr: _Frame, bcolour: dict[str, str], marks: Counter[str]) -> list[str]:
    out: list[str] = []
    ly = fr.height - 4
    lx = fr.left
    for b, c in bcolour.items():
        out.append(f'<rect x="{lx}" y="{ly - 8}" width="10" height="8" fill="{c}"/>')
        out.append(f'<text x="{lx + 13}" y="{ly}" font-size="10">on {escape(b)}</text>')
        lx += 110
    for k, n in marks.items():
        out.append(f'<path d="M{lx + 4},{ly - 9} l-4,8 h8 z" fill="{ANOMALY_COLOURS[k]}"/>')
        out.append(f'<text x="{lx + 12}" y="{ly}" font-size="10">{k} ({n})</text>')
        lx += 110
    return out


def timeline_svg(d: RunData, width: int = 960) -> Markup:
    """Send/receive rate per agent, shaded fault windows, anomaly markers, connection lanes."""
    recs = [r for rs in d.agents.values() for r in rs if isinstance(r.get("ts"), (int, float))]
    ts = [float(r["ts"]) for r in recs] + [f[k] for f in d.faults for k in ("start", "end") if k in f]
    if not ts:
        return Markup("<p>no timed records</p>")
    names = sorted(d.agents)
    lanes, conn_events = _lanes(d, names)
    probe = _Frame(min(ts), max(ts), width, 0)
    fr = _Frame(probe.t0, probe.t1, width, probe.lanes_top + probe.lane_h * len(lanes) + 50)
    colour = {a: PALETTE[i % len(PALETTE)] for i, a in enumerate(names)}
    series, bin_s = _rates(d, fr.t0, fr.span)
    peak = max((max(b) for b in series.values()), default=1) or 1
    out: list[str] = [
        f'<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{fr.height}" '
        f'viewBox="0 0 {width} {fr.height}" role="img" aria-label="run timeline">'
    ]
    out += _fault_windows(fr, d.faults)
    out += _axes(fr, peak)
    out += _rate_lines(fr, series, bin_s, colour, peak)
    marks_svg, marks = _anomaly_marks(fr, d)
    out += marks_svg
    lanes_svg, bcolour = _connection_lanes(fr, d, lanes, conn_events)
    out += lanes_svg
    out += _legend(fr, bcolour, marks)
    out.append("</svg>")
    return Markup("".join(out))
