"""`bfh compare OLD NEW`: is NEW worse at failing over than OLD (harness/compare, docs/compare.md)?
Exit 0 no regression, 1 a regression, 2 could not compare."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from harness.cli.common import crash, err, error, file_problem


def cmd_compare(args: argparse.Namespace) -> int:
    from harness.compare import CompareError, ToleranceError, compare, tolerance
    from harness.compare.html import write_html
    from harness.compare.render import print_comparison, write_json, write_junit
    from harness.contracts.outfile import STDOUT

    writers = {"json": write_json, "junitxml": write_junit, "html": write_html}
    outputs = {opt: v for opt in writers if (v := getattr(args, opt, None))}
    on_stdout = [opt for opt, v in outputs.items() if v == STDOUT]  # the table then goes to stderr
    if len(on_stdout) > 1:
        error(f"{' and '.join('--' + o for o in on_stdout)} both name stdout (-); give one of them a file")
        return 2
    for opt, v in outputs.items():  # before anything is read: a bad path writes nothing
        why = file_problem(Path(v))
        if why:
            error(f"--{opt} {v}: {why}")
            return 2
    try:
        c = compare(args.old, args.new, tolerance.load())
    except (CompareError, ToleranceError) as e:
        error(str(e))
        return 2
    except Exception as e:  # noqa: BLE001 - a crash on this input's data: one line, exit 2
        error(f"cannot compare {args.old} with {args.new} ({crash(e)})")
        return 2
    out = Console(stderr=bool(on_stdout))
    if not out.is_terminal:  # a log or a pipe: the table's own width, not 80 columns
        out = Console(stderr=bool(on_stdout), width=150)
    print_comparison(c, out)
    for opt, v in outputs.items():
        try:
            writers[opt](c, Path(v))
        except BrokenPipeError:
            raise  # the reader has gone (`| head -1`): main ends quietly
        except OSError as e:
            error(f"--{opt} {v}: cannot write it ({e.strerror or e})")
            return 2
        if v != STDOUT:
            err.print(f"{opt}: {v}", highlight=False, markup=False)
    return c.exit_code
