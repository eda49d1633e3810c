"""The check's outcome on the terminal (two sections: CONTRACT, then BEHAVIOUR) or as JSON."""

from __future__ import annotations

import json
from collections import defaultdict

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.agentcheck.check import CheckResult
from harness.agentcheck.findings import Finding, contract_line
from harness.agentcheck.rules import RULES

#: rows shown per rule on the terminal (--json has every one)
PER_RULE = 5


def print_json(result: CheckResult) -> None:
    print(json.dumps(result.to_dict(), indent=2))


def _short(where: str | None) -> str:
    """`.../agents/agent-1/messages.jsonl:12` -> `messages.jsonl:12` (the path is printed once)."""
    return (where or "").rsplit("/", 1)[-1]


def _contract_table(findings: list[Finding]) -> Table:
    t = Table(title="CONTRACT: the adapter's log or exit is wrong (fix the adapter)", title_justify="left")
    t.add_column("rule", no_wrap=True)
    t.add_column("record", no_wrap=True)
    t.add_column("deviation", overflow="fold")
    by_rule: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        by_rule[f.rule].append(f)
    for rule, fs in by_rule.items():
        text = RULES[rule].text if rule in RULES else ""
        doc = contract_line(rule) or "(not stated)"
        t.add_row(f"[bold]{rule}[/]", doc, f"[bold]{escape(text)}[/] ({len(fs)})")
        for f in fs[:PER_RULE]:
            t.add_row("", _short(f.where), escape(f.what))
        if len(fs) > PER_RULE:
            t.add_row("", "", f"... and {len(fs) - PER_RULE} more (--json lists every one)", end_section=True)
        else:
            t.rows[-1].end_section = True
    return t


def _behaviour_table(findings: list[Finding]) -> Table:
    t = Table(
        title="BEHAVIOUR: promises the client broke (findings, not contract errors)", title_justify="left"
    )
    for col in ("promise", "evidence", "what"):
        t.add_column(col, overflow="fold")
    for f in findings:
        t.add_row(f.rule, escape(f.where or ""), escape(f.what))
    return t


def print_report(result: CheckResult, console: Console | None = None) -> None:
    c = console or Console(emoji=False)
    c.print(f"[bold]bfh agent check[/] {result.command}", highlight=False, soft_wrap=True)
    if result.run_dir:
        c.print(f"run folder: {result.run_dir}", highlight=False, soft_wrap=True)
    logs = sorted({f.where.rpartition(":")[0] for f in result.contract if f.where and ":" in f.where})
    for log in logs:
        c.print(f"log: {log}", highlight=False, soft_wrap=True)
    if result.error:
        c.print(f"[red]could not run:[/] {result.error}", highlight=False, soft_wrap=True)
    if result.contract:
        c.print(_contract_table(result.contract))
    elif not result.error:
        c.print("[green]CONTRACT: no deviation[/]")
    if result.behaviour:
        c.print(_behaviour_table(result.behaviour))
    elif result.verdict is not None:
        c.print(f"BEHAVIOUR: no broken promise (verdict {result.verdict})")
    elif not result.error:
        c.print("BEHAVIOUR: not judged (--contract-only)")
    for n in result.notes:
        c.print(f"note: {n}", highlight=False, soft_wrap=True)
    colour = {0: "green", 1: "red"}.get(result.exit_code, "yellow")
    word = {0: "PASS", 1: f"FAIL ({len(result.contract)} contract errors)"}.get(
        result.exit_code, "COULD NOT RUN"
    )
    c.print(f"[{colour}]{word}[/] in {result.wall_s:.0f} s", highlight=False)
