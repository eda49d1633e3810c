"""`bfh judge`, `bfh report` and `bfh reconcile`: run folders judged from disk (no broker)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.markup import escape

from harness.cli.common import crash, err, error, exit_code
from harness.cli.parser import EXAMPLES


def cmd_report(args: argparse.Namespace) -> int:
    from harness.report.html import ReportError, render_report, run_headline
    from harness.verdict import VerdictError, judge

    try:  # the evidence first (harness/contracts/manifest.py), then re-judged from disk, so the report
        _check_evidence(Path(args.run_dir))  # shows today's checkers' verdict
        judge(Path(args.run_dir))
    except VerdictError as e:
        raise ReportError(str(e)) from None
    except Exception as e:  # noqa: BLE001 - a crash on this run's data: one line, exit 2
        raise ReportError(f"{args.run_dir}: the judge crashed ({crash(e)})") from None
    html = render_report(Path(args.run_dir))
    if args.json:
        row = run_headline(Path(args.run_dir))
        print(json.dumps({**row, "report": str(html), "summary_md": str(html.with_name("summary.md"))}))
    else:
        err.print(f"report: {html}\nsummary: {html.with_name('summary.md')}")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    """The journey of one message (harness/verdict/explain.py): exit 0, or 2 when it cannot be read."""
    from harness.verdict import VerdictError
    from harness.verdict.explain import explain

    try:
        journey = explain(Path(args.run_dir), str(args.msg_id))
    except VerdictError as e:
        error(str(e))
        return 2
    if args.json:
        print(json.dumps(journey.to_dict(), default=str))
    else:
        print("\n".join(journey.lines()))
    return 0


def cmd_reconcile(args: argparse.Namespace, rest: list[str]) -> int:
    """The Spark reconciliation, then the verdict of each run (harness.verdict), as `bfh judge`."""
    from spark_analysis.reconcile import main as reconcile_main
    from spark_analysis.reconcile import run_dirs

    if "-h" in rest or "--help" in rest:
        try:
            return reconcile_main(rest)
        finally:  # its own parser prints the options; the examples follow
            print(EXAMPLES["reconcile"])
    from harness.contracts import manifest
    from harness.verdict import VerdictError, refuse_unjudgeable

    try:
        for d in run_dirs(rest):
            refuse_unjudgeable(d)
            manifest.verify(d, analysis=False)  # the logs it reads are the run's sealed ones
    except (VerdictError, manifest.EvidenceError) as e:
        error(str(e))
        return 2
    code = reconcile_main([*rest, "--quiet"])
    if code != 0:
        return code
    for d in run_dirs(rest):  # the new analysis/ is what the manifest seals from now on
        manifest.reseal_analysis(d)
    return judge_dirs(run_dirs(rest), None, as_json=False)


def _check_evidence(run_dir: Path) -> None:
    """The run folder against its manifest (harness/contracts/manifest.py): missing, foreign or altered
    evidence is a VerdictError; a folder from before manifests gets one warning line."""
    from harness.contracts import manifest
    from harness.verdict import VerdictError

    try:
        warning = manifest.verify(run_dir)
    except manifest.EvidenceError as e:
        raise VerdictError(str(e)) from None
    if warning:
        err.print(f"[yellow]warning:[/] {escape(' '.join(warning.split()))}", soft_wrap=True, highlight=False)


def cmd_judge(args: argparse.Namespace) -> int:
    gates = [g.strip() for g in args.gates.split(",") if g.strip()] if args.gates else None
    return judge_dirs([Path(d) for d in args.run_dirs], gates, args.json, args.gate)


def judge_dirs(dirs: list[Path], gates: list[str] | None, as_json: bool, gate: str | None = None) -> int:
    """Judge reconciled run folders from disk, every one of them: 0 all pass (or n/a), 1 a fail,
    2 a folder that cannot be judged (its evidence missing, foreign or altered, a checker or the
    report crashed): the worst code of all."""
    from harness.report.html import ReportError, render_report
    from harness.verdict import VerdictError, judge

    code, rows = 0, list[dict[str, Any]]()
    for d in dirs:
        try:
            _check_evidence(d)
            v = judge(d, gates, gate=gate)
        except VerdictError as e:
            error(str(e))
            code = 2
            rows.append({"run_dir": str(d), "verdict": "error", "error": " ".join(str(e).split())})
            continue
        except Exception as e:  # noqa: BLE001 - a crash on this run's data: one line, exit 2
            error(f"{d}: the judge crashed ({crash(e)})")
            code = 2
            rows.append({"run_dir": str(d), "verdict": "error", "error": crash(e)})
            continue
        report_error = None
        try:
            render_report(d)
        except (ReportError, OSError) as e:
            report_error = " ".join(str(e).split())
            err.print(
                f"[yellow]report not rendered: {escape(report_error)}[/]", soft_wrap=True, highlight=False
            )
        code = max(code, exit_code(v.verdict), 2 if report_error else 0)
        row = {"run_dir": str(v.run_dir), "verdict": v.verdict, "broken": v.broken, "checks": v.table()}
        rows.append({**row, "report_error": report_error} if report_error else row)
        if not as_json:
            colour = {"pass": "green", "fail": "red"}.get(v.verdict, "yellow")
            err.print(f"[{colour}]{v.verdict.upper()}[/] {escape(str(v.run_dir))}")
            if v.verdict != "pass":
                err.print(escape(v.message()), soft_wrap=True, highlight=False)
    if as_json:
        print(json.dumps(rows, indent=2, default=str))
    return code
