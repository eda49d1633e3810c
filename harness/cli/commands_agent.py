"""`bfh agent check CMD`: the agent contract check (harness/agentcheck/); exit 0 no contract
error, 1 contract errors, 2 could not run."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.common import err


def cmd_agent(args: argparse.Namespace) -> int:
    from harness.agentcheck.check import check_agent
    from harness.agentcheck.report import print_json, print_report

    err.print(
        "bfh agent check: the agent on a healthy pair, then a kill -9 of the master and a link cut "
        "(about a minute)",
        highlight=False,
    )
    result = check_agent(
        args.agent_command,
        reports=Path(args.reports),
        protocol=args.protocol,
        behaviour=not args.contract_only,
        seed=args.seed,
    )
    if args.json:
        print_json(result)
    else:
        print_report(result)
    return result.exit_code
