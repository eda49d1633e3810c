"""`bfh compare OLD NEW`: is NEW worse at failing over than OLD (harness/compare, docs/compare.md)?
Exit 0 no regression, 1 a regression, 2 could not compare."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from harness.cli.common import crash, err, error, file_problem


def cmd_compare(args: argparse.Namespace) -> int:
    from harness.compare import CompareError, ToleranceError, compare, tolerance
    from harness.compare.html import write_html
    from harness.compare.render import print_comparison, write_json, write_junit

    writers = {"json": write_json, "junitxml": write_junit, "html": write_html}
    to_stdout = args.json == "-"  # the JSON on stdout, the table on stderr
    outputs = {opt: Path(v) for opt in writers if (v := getattr(args, opt, None)) and v != "-"}
    for opt, path in outputs.items():  # before anything is read: a bad path writes nothing
        why = file_problem(path)
        if why:
            error(f"--{opt} {path}: {why}")
            return 2
    try:
        c = compare(args.old, args.new, tolerance.load())
    except (CompareError, ToleranceError) as e:
        error(str(e))
        return 2
    except Exception as e:  # noqa: BLE001 - a crash on this input's data: one line, exit 2
        error(f"cannot compare {args.old} with {args.new} ({crash(e)})")
        return 2
    out = Console(stderr=to_stdout)
    if not out.is_terminal:  # a log or a pipe: the table's own width, not 80 columns
        out = Console(stderr=to_stdout, width=150)
    print_comparison(c, out)
    if to_stdout:
        print(json.dumps(c.to_dict(), indent=1))
    for opt, path in outputs.items():
        try:
            writers[opt](c, path)
        except OSError as e:
            error(f"--{opt} {path}: cannot write it ({e.strerror or e})")
            return 2
        err.print(f"{opt}: {path}", highlight=False, markup=False)
    return c.exit_code
