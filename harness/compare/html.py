"""`bfh compare --html PATH`: one self-contained page (inline CSS and SVG, no script) that plots
OLD's and NEW's distributions side by side for every entry and measure, with the verdict."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from harness.compare.render import COLOURS, difference, label, num, promise_lines
from harness.compare.results import Comparison, MeasureRow
from harness.contracts.manifest import atomic_write

TEMPLATES = Path(__file__).parent.parent / "templates"
W, H, TOP, BOTTOM, LEFT = 300, 190, 12, 24, 52
COLUMNS = (("OLD", 130, "#4477aa"), ("NEW", 240, "#cc6677"))


def _scale(values: list[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5 * (abs(lo) or 1), hi + 0.5 * (abs(hi) or 1)
    pad = (hi - lo) * 0.08
    return lo - pad, hi + pad


def _f(x: float) -> str:
    return f"{x:.1f}"


def distribution_svg(m: MeasureRow) -> Markup:
    """Both sides' samples (dots, spread sideways so equal values stay visible), each round's
    value (a diamond), the median (a bar) and the p95 (a dashed bar); NEW's column also shows OLD's
    median plus the tolerance (dotted), the line NEW must clearly pass to be `worse`."""
    values = [v for v in (*m.old.samples, *m.new.samples) if math.isfinite(v)]  # +inf: never reached
    if not values:
        return Markup(
            "<p>nothing measured</p>" if not m.old.samples + m.new.samples else "<p>never reached</p>"
        )
    limit = (m.old.median + m.tolerance) if m.old.median is not None else None
    limit = limit if limit is not None and math.isfinite(limit) else None
    lo, hi = _scale([*values, *([limit] if limit is not None else [])])

    def y(v: float) -> float:
        return TOP + (hi - v) / (hi - lo) * (H - TOP - BOTTOM)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
        f'role="img" aria-label="{escape(m.measure)}: OLD and NEW">',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" stroke="#888"/>',
    ]
    for i in range(5):  # the value axis
        v = lo + (hi - lo) * i / 4
        at = f'x="{LEFT - 4}" y="{_f(y(v) + 3)}"'
        out.append(f'<text {at} font-size="10" text-anchor="end">{escape(num(v))}</text>')
    for (heading, x, colour), side in zip(COLUMNS, (m.old, m.new), strict=True):
        never = sum(math.isinf(v) for v in side.rounds)
        heading += f" ({never} never reached)" if never else ""
        out.append(f'<text x="{x}" y="{H - 6}" font-size="11" text-anchor="middle">{heading}</text>')
        for k, v in enumerate(side.samples):
            if not math.isfinite(v):
                continue
            dx = ((k * 7) % 11 - 5) * 3  # deterministic spread
            out.append(
                f'<circle cx="{x - 22 + dx}" cy="{_f(y(v))}" r="2.5" fill="{colour}" fill-opacity="0.5"/>'
            )
        for v in (v for v in side.rounds if math.isfinite(v)):
            yy = y(v)
            out.append(
                f'<path d="M{x + 18} {_f(yy - 4)} l4 4 l-4 4 l-4 -4 z" fill="{colour}"><title>round: '
                f"{escape(num(v))}</title></path>"
            )
        for mark, dash in ((side.median, ""), (side.p95, ' stroke-dasharray="4 3"')):
            if mark is not None and math.isfinite(mark):
                out.append(
                    f'<line x1="{x - 40}" x2="{x + 30}" y1="{_f(y(mark))}" y2="{_f(y(mark))}" '
                    f'stroke="{colour}" stroke-width="2"{dash}/>'
                )
    if limit is not None and math.isfinite(limit):
        out.append(
            f'<line x1="{COLUMNS[1][1] - 45}" x2="{COLUMNS[1][1] + 35}" y1="{_f(y(limit))}" '
            f'y2="{_f(y(limit))}" stroke="#b00" stroke-dasharray="1 3" stroke-width="2">'
            f"<title>OLD median + tolerance</title></line>"
        )
    out.append("</svg>")
    return Markup("".join(out))


def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
    )


def page(c: Comparison) -> str:
    rows: list[dict[str, Any]] = [
        {
            "row": m,
            "label": label(m),
            "difference": difference(m),
            "tolerance": num(m.tolerance, True),
            "old": f"{num(m.old.median)} / {num(m.old.p95)}",
            "new": f"{num(m.new.median)} / {num(m.new.p95)}",
            "svg": distribution_svg(m),
            "colour": {"bold red": "#b00", "green": "#070", "yellow": "#a60"}.get(
                COLOURS.get(m.verdict, ""), "#333"
            ),
        }
        for m in c.measures
    ]
    return (
        _env()
        .get_template("compare.html.j2")
        .render(c=c, rows=rows, promises=promise_lines(c), summary=c.summary(), level=c.level)
    )


def write_html(c: Comparison, path: Path) -> Path:
    atomic_write(path, page(c))
    return path
