"""The report's "Broker configuration" block: for runs of imported deployment files (`config:`),
which file each member ran, the rewrites (the diff against the user's file) and the warnings.

Reads only the run folder (`brokers/<member>/config.json` and `config.diff`, written by
harness/deploy/importconf.py); renders nothing for runs of generated configurations.
"""

from __future__ import annotations

import json
from pathlib import Path

from markupsafe import Markup, escape

_STYLE = (
    "<style>#configuration pre{background:#f6f8fa;padding:.5em;overflow-x:auto;font-size:12px}"
    "#configuration .add{color:#1b5e20}#configuration .del{color:#b71c1c}"
    "#configuration .warn{color:#8a5a00}</style>"
)


def load(run_dir: Path | str) -> list[dict[str, object]]:
    """One record per member that ran an imported file, with its diff text."""
    out = []
    for f in sorted(Path(run_dir).glob("brokers/*/config.json")):
        try:
            rec = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        diff = f.with_name("config.diff")
        rec["diff"] = diff.read_text(encoding="utf-8", errors="replace") if diff.exists() else ""
        out.append(rec)
    return out


def _diff_html(diff: str) -> Markup:
    lines = []
    for ln in diff.splitlines():
        cls = "add" if ln.startswith("+") and not ln.startswith("+++") else ""
        cls = "del" if ln.startswith("-") and not ln.startswith("---") else cls
        lines.append(Markup('<span class="{}">{}</span>').format(cls, ln) if cls else escape(ln))
    return Markup("\n").join(lines)


def config_section(run_dir: Path | str | None) -> Markup:
    """The HTML block (empty when the run imported no deployment file)."""
    records = load(run_dir) if run_dir else []
    if not records:
        return Markup("")
    parts = [Markup(_STYLE), Markup('<section id="configuration"><h2>Broker configuration</h2>')]
    parts.append(
        Markup(
            "<p><small>The deployment's own activemq.xml files, with only the rewrites a test run "
            "needs (ports, store, names, folders, limits, bridge hosts).</small></p>"
        )
    )
    warned: list[str] = []
    for rec in records:
        warned += [str(w) for w in rec.get("warnings", []) or [] if str(w) not in warned]  # type: ignore[attr-defined]
    if warned:
        parts.append(Markup('<h3>Warnings</h3><ul class="warn">'))
        parts += [Markup("<li>{}</li>").format(w) for w in warned]
        parts.append(Markup("</ul>"))
    parts.append(Markup("<table><tr><th>member</th><th>file</th><th>rewrites</th></tr>"))
    for rec in records:
        rewrites = Markup("<br>").join(escape(str(r)) for r in rec.get("rewrites", []) or [])  # type: ignore[attr-defined]
        parts.append(
            Markup("<tr><td>{}</td><td><code>{}</code></td><td><small>{}</small></td></tr>").format(
                rec.get("member"), rec.get("source"), rewrites
            )
        )
    parts.append(Markup("</table>"))
    for rec in records:
        parts.append(
            Markup(
                "<details><summary>diff for {} (<code>brokers/{}/config.diff</code>)</summary>"
                "<pre>{}</pre></details>"
            ).format(rec.get("member"), rec.get("member"), _diff_html(str(rec.get("diff", ""))))
        )
    parts.append(Markup("</section>"))
    return Markup("").join(parts)
