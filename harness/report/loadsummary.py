"""The report's "Machine load" section: run.json `observations.load` (harness/contracts/loadlog.py),
the evidence the overload rule read (docs/verdict.md, "Overload")."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

from harness.contracts.loadlog import OVERLOADED_S, STARVED_PER_CORE


def _s(x: Any) -> str:
    return "–" if not isinstance(x, int | float) or isinstance(x, bool) else f"{x:.3f} s"


def load_section(run: dict[str, Any]) -> Markup | None:
    """A small table of the run's load summary; None for a run without one (an older folder)."""
    load = (run.get("observations") or {}).get("load")
    if not isinstance(load, dict) or not load.get("samples"):
        return None
    probe, proxy, brokers = (load.get(k) or {} for k in ("probe", "proxy", "brokers"))
    rows = [
        ("samples (one a second)", load.get("samples")),
        ("harness probe oversleep: max / p99", f"{_s(probe.get('max_s'))} / {_s(probe.get('p99_s'))}"),
        ("fault proxy API round trip: max / p99", f"{_s(proxy.get('max_s'))} / {_s(proxy.get('p99_s'))}"),
        (
            "brokers' first byte: max / p99 (no answer)",
            f"{_s(brokers.get('max_s'))} / {_s(brokers.get('p99_s'))} ({brokers.get('no_answer', 0)})",
        ),
        (
            "load average max (per core)",
            f"{load.get('load1_max', '–')} on {load.get('cpus') or '?'} cores "
            f"({load.get('load1_per_core_max', '–')})",
        ),
        (f"overloaded samples (delay ≥ {OVERLOADED_S:g} s)", load.get("overloaded_samples", 0)),
        (f"starved samples (≥ {STARVED_PER_CORE:g} runnable per core)", load.get("starved_samples", "–")),
    ]
    worst = ", ".join(
        f"{w.get('delay_s')} s at {w.get('at')} ({w.get('source')})" for w in load.get("worst") or []
    )
    body = "".join(f'<tr><td>{escape(k)}</td><td class="n">{escape(str(v))}</td></tr>' for k, v in rows)
    return Markup(
        '<div id="machine-load"><h2>Machine load</h2><p><small>Did the harness and the brokers get the '
        "CPU they needed (docs/verdict.md, Overload)? A timing promise broken within the measured "
        f"overload's reach is unknown, not fail. Worst samples: {escape(worst or '–')}.</small></p>"
        f'<table id="load">{body}</table></div>'
    )
