"""The summary table printed after a run (reads analysis/summary.json's contract keys only)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

DELIVERY_ORDER = (
    "expected",
    "ok",
    "duplicated",
    "lost",
    "missed",
    "dropped_expected",
    "ghost",
    "in_doubt_missing",
)


def summary_table(summary: dict[str, Any]) -> Table:
    verdict = str(summary.get("verdict", "?"))
    colour = "green" if verdict == "pass" else "red"
    t = Table(title=f"run {summary.get('run')}: verdict [bold {colour}]{verdict.upper()}[/]")
    t.add_column("measure")
    t.add_column("count", justify="right")
    for k, v in summary.get("totals", {}).items():
        t.add_row(f"messages {k}", str(v))
    deliveries = summary.get("deliveries", {})
    for k in DELIVERY_ORDER:
        if k in deliveries:
            style = "red" if k in ("lost", "ghost") and deliveries[k] else ""
            t.add_row(f"deliveries {k}", f"[{style}]{deliveries[k]}[/]" if style else str(deliveries[k]))
    t.add_row("unexpected", str(summary.get("unexpected", 0)))
    lat = summary.get("latency_s") or {}
    if lat:
        t.add_row(
            "latency p50/p99/max (s)", " / ".join(f"{lat.get(q, 0) or 0:.3f}" for q in ("p50", "p99", "max"))
        )
    return t


def print_summary(summary: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console(emoji=False)
    console.print(summary_table(summary))
    for c in summary.get("checks", []) or []:
        if c.get("status") == "fail":
            tag = "broken" if c.get("gated") else "reported"
            e = (c.get("evidence") or [{}])[0].get("what", "")
            what = escape(f"{c['promise']}: {c['count']} — {c.get('detail', '')}; e.g. {e}")
            console.print(f"[red]{tag}[/] {what}", emoji=False)  # evidence holds `[account ...]`, `:-1:`
