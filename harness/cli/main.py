"""`bfh`: a thin command layer over the harness stages (the entry point, `harness.cli.main:main`).

The parser is harness/cli/parser.py; each handler only calls its stage's entry point:
commands_run.py (demo, run, validate), commands_judge.py (judge, report, reconcile),
commands_topology.py (up, down, status, topology, compose, images, fault-proxy),
commands_compare.py (compare).
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from rich.markup import escape

from harness.cli.common import err, error, output_problem, rounds
from harness.cli.common import without_rounds as _without_rounds  # noqa: F401  # its old name
from harness.cli.parser import build_parser

Handler = Callable[[argparse.Namespace], int]


class _NoInterruptTraces(logging.Filter):
    """py4j logs the KeyboardInterrupt that stops a Spark call with its whole traceback; the
    interrupt's own line says it (one line, not a page)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and record.exc_info[0] is KeyboardInterrupt)


def _quiet_interrupts() -> None:
    for name in ("", "py4j", "py4j.java_gateway", "py4j.clientserver"):
        logging.getLogger(name).addFilter(_NoInterruptTraces())


def _sigterm(signum: int, frame: Any) -> None:
    # Unwind like Ctrl-C so every `with` block stops what it started.
    raise KeyboardInterrupt


def _handlers() -> dict[str, Handler]:
    from harness.cli import commands_agent as a
    from harness.cli import commands_compare as c
    from harness.cli import commands_judge as j
    from harness.cli import commands_run as r
    from harness.cli import commands_topology as t

    return {
        "demo": r.cmd_demo,
        "run": r.cmd_run_any,
        "validate": lambda a: rounds(a, r.cmd_validate),
        "images": t.cmd_images,
        "compose": t.cmd_compose,
        "up": t.cmd_up,
        "down": t.cmd_down,
        "status": t.cmd_status,
        "topology": t.cmd_topology,
        "report": j.cmd_report,
        "judge": j.cmd_judge,
        "explain": j.cmd_explain,
        "agent": a.cmd_agent,
        "compare": c.cmd_compare,
    }


def _raw(argv: list[str]) -> int | None:
    """The commands that hand their arguments on untouched to their own parsers."""
    if argv and argv[0] == "fault-proxy":
        from harness.cli.commands_topology import cmd_fault_proxy

        return cmd_fault_proxy(argv[1:])
    if argv and argv[0] == "doctor":  # first: it must work when the rest cannot be imported
        from harness.cli.doctor import main as doctor

        return doctor(argv[1:])
    if argv and argv[0] == "reconcile":
        from harness.cli.commands_judge import cmd_reconcile

        return cmd_reconcile(argparse.Namespace(), argv[1:])
    return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, _sigterm)
    _quiet_interrupts()
    try:
        code = _raw(argv)
    except KeyboardInterrupt:  # e.g. `bfh reconcile` stopped mid-Spark: one line, no traceback
        _interrupted()
        return 130
    except BrokenPipeError:  # `bfh reconcile --help | head -2`
        _stdout_to_devnull()
        return 141
    if code is not None:
        return code
    args = build_parser().parse_args(argv)
    bad_output = output_problem(args)
    if bad_output:  # before anything starts or is written
        error(bad_output)
        return 2
    from harness.agents.launch import AgentError
    from harness.backends import BackendError
    from harness.catalog.scenarios import CatalogError, one_line
    from harness.cli.supervisor import UpError
    from harness.coverage import CoverageError
    from harness.faults.schedule import ScheduleError
    from harness.report.html import ReportError
    from harness.run.runner import RunError
    from harness.topology import TopologyError

    try:
        return _handlers()[args.cmd](args)
    except (CatalogError, CoverageError, ReportError, UpError) as e:
        err.print(f"[red]error:[/] {escape(one_line(e))}", soft_wrap=True, highlight=False)
        return 2
    except (TopologyError, ScheduleError, BackendError, RunError, AgentError) as e:
        if args.cmd == "validate":  # ops scripts want one line
            err.print(f"[red]error:[/] {escape(one_line(e))}", soft_wrap=True, highlight=False)
            return 2
        err.print(f"[red]error:[/] {escape(str(e))}", soft_wrap=True, highlight=False)
        return 2
    except KeyboardInterrupt:
        _interrupted()
        return 130
    except BrokenPipeError:  # stdout's reader has gone (`bfh compare ... --json - | head -1`)
        _stdout_to_devnull()
        return 141  # as a process SIGPIPE ended: 128 + 13


def _stdout_to_devnull() -> None:
    """What is left in stdout's buffer goes nowhere, so the exit does not raise again."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, io.UnsupportedOperation):
        pass


def _interrupted() -> None:
    err.print("[yellow]interrupted: everything started was stopped[/]")


if __name__ == "__main__":
    sys.exit(main())
