"""The check's outcome on the terminal (two sections: CONTRACT, then BEHAVIOUR) or as JSON."""

from __future__ import annotations

import json
from collections import defaultdict

from rich.console import Console
from rich.table import Table

from harness.agentcheck.check import CheckResult
from harness.agentcheck.findings import Finding, contract_line
from harness.agentcheck.rules import RULES

#: rows shown per rule on the terminal (--json has every one)
PER_RULE = 8


def print_json(result: CheckResult) -> None:
    print(json.dumps(result.to_dict(), indent=2))


def _contract_table(findings: list[Finding]) -> Table:
    t = Table(title="CONTRACT: the adapter's log or exit is wrong (fix the adapter)", title_justify="left")
    for col in ("rule", "record", "deviation", "contract"):
        t.add_column(col, overflow="fold")
    by_rule: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        by_rule[f.rule].append(f)
    for rule, fs in by_rule.items():
        text = RULES[rule].text if rule in RULES else ""
        line = contract_line(rule) or "(not stated in docs/agent-contract.md)"
        for i, f in enumerate(fs[:PER_RULE]):
            t.add_row(rule if i == 0 else "", f.where or "", f.what, f"{line}\n{text}" if i == 0 else "")
        if len(fs) > PER_RULE:
            t.add_row("", "", f"... and {len(fs) - PER_RULE} more of {rule} (--json lists every one)", "")
    return t


def _behaviour_table(findings: list[Finding]) -> Table:
    t = Table(
        title="BEHAVIOUR: promises the client broke (findings, not contract errors)", title_justify="left"
    )
    for col in ("promise", "evidence", "what"):
        t.add_column(col, overflow="fold")
    for f in findings:
        t.add_row(f.rule, f.where or "", f.what)
    return t


def print_report(result: CheckResult, console: Console | None = None) -> None:
    c = console or Console()
    c.print(f"[bold]bfh agent check[/] {result.command}", highlight=False, soft_wrap=True)
    if result.run_dir:
        c.print(f"run folder: {result.run_dir}", highlight=False, soft_wrap=True)
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
    for n in result.notes:
        c.print(f"note: {n}", highlight=False, soft_wrap=True)
    colour = {0: "green", 1: "red"}.get(result.exit_code, "yellow")
    word = {0: "PASS", 1: f"FAIL ({len(result.contract)} contract errors)"}.get(
        result.exit_code, "COULD NOT RUN"
    )
    c.print(f"[{colour}]{word}[/] in {result.wall_s:.0f} s", highlight=False)
