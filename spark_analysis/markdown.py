"""The reconciliation's short Markdown summary (``analysis/report.md``) rendered from a summary dict.

The run's full report (report.html, with the verdict) is harness.report.html's."""

from __future__ import annotations

from typing import Any

import jinja2

from spark_analysis.percentile import nearest_rank
from spark_analysis.statuses import EXTRA_STATUSES, STATUSES

TEMPLATE = """\
# Reconciliation: {{ s.run }}

Counts and classes only: the verdict (pass or fail, against the policy's limits) is the judge's
(analysis/verdict.json, report.html).

| messages | count |
| --- | ---: |
| attempted | {{ s.totals.attempted }} |
| acknowledged | {{ s.totals.acknowledged }} |
| dropped | {{ s.totals.dropped }} |
| in doubt | {{ s.totals.in_doubt }} |
| unexpected (never attempted) | {{ s.unexpected }} |

| deliveries (message, subscription) | count |
| --- | ---: |
| expected | {{ s.deliveries.expected }} |
{% for k in statuses -%}
| {{ k }} | {{ s.deliveries[k] }} |
{% endfor %}
Latency of first receipt (s): p50 {{ fmt(s.latency_s.p50) }}, p95 {{ fmt(s.latency_s.p95) }}, \
p99 {{ fmt(s.latency_s.p99) }}, max {{ fmt(s.latency_s.max) }} over {{ s.latency_s.count }} receipts.
Out-of-order first receipts: {{ s.out_of_order.total }}.
{% if s.malformed.count %}Malformed records rejected: {{ s.malformed.count }} \
({% for k, v in s.malformed.by_reason.items() %}{{ k }}: {{ v }}\
{% if not loop.last %}, {% endif %}{% endfor %}).
{% endif %}
{%- if s.faults %}

| fault | kind | target | window (s from first) | anomalies | acked / received in window | vacuous |
| --- | --- | --- | --- | ---: | --- | --- |
{% for f in s.faults -%}
| {{ f.fault_id }} | {{ f.fault }} | {{ f.target }} \
| {{ fmt(f.window[0] - t0) }} – {{ fmt(f.window[1] - t0) }} \
| {{ f.anomaly_count }}{% for k, a in f.anomalies.items() %} {{ k }}={{ a.count }}{% endfor %} \
| {{ f.acknowledged_in_window }} / {{ f.received_in_window }} | {{ "**yes**" if f.vacuous else "no" }} |
{% endfor %}
Recovery (s from fault start to the first success of each role):
{% for f in s.faults %}
- {{ f.fault_id }}: {{ recovery(f.recovery_s) }}
{%- endfor %}
{% endif %}
{%- if s.examples %}

Examples per anomaly kind:
{% for kind, ids in s.examples.items() %}
- {{ kind }}: {{ ids | join(", ") }}
{%- endfor %}
{% endif %}
"""

_ENV = jinja2.Environment(autoescape=False, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
_TEMPLATE = _ENV.from_string(TEMPLATE)


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


#: roles listed one by one up to this many; a fleet's thousands fold to their spread and slowest
LISTED_ROLES = 12


def _recovery(recovery_s: dict[str, dict[str, float | None]]) -> str:
    pairs = [(f"{agent}/{role}", v) for agent, roles in recovery_s.items() for role, v in roles.items()]
    if len(pairs) <= LISTED_ROLES:
        return " ".join(f"{name}={_fmt(v)}" for name, v in pairs)
    back = sorted((v, name) for name, v in pairs if v is not None)
    if not back:
        return f"{len(pairs)} roles, none with a success after the fault"

    def q(p: float) -> str:
        return _fmt(nearest_rank([v for v, _ in back], p))

    slowest = ", ".join(f"{name}={_fmt(v)}" for v, name in back[-5:][::-1])
    return (
        f"{len(back)} of {len(pairs)} roles with a success after it (– for {len(pairs) - len(back)}): "
        f"p50 {q(50)}, p95 {q(95)}, max {_fmt(back[-1][0])}; slowest: {slowest}"
    )


def render_reconciliation_md(summary: dict[str, Any]) -> str:
    t0 = (summary.get("time_span") or [None])[0] or 0.0
    return _TEMPLATE.render(
        s=summary, statuses=STATUSES + EXTRA_STATUSES, fmt=_fmt, t0=t0, recovery=_recovery
    )
