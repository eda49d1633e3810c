"""What the `bfh` commands share: the stderr console, exit codes, one-line errors, --rounds."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

err = Console(stderr=True, emoji=False)


def note(
    args: argparse.Namespace, name: str, verdict: str, run_dir: Any, message: str, why: str = ""
) -> None:
    """One judged run of this command, for --rounds (harness/run/rounds.py); `why`: an unknown
    verdict's reason."""
    if isinstance(getattr(args, "outcomes", None), list):
        args.outcomes.append((name, verdict, Path(run_dir) if run_dir else None, message))
    if why:
        args.whys = {**(getattr(args, "whys", None) or {}), name: why}


def settled(once: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """`bfh run` whose verdict is unknown runs again (--rerun-unknown N, the same seed); still
    unknown, it is inconclusive: one line saying why, exit 2, or with --unknown skip exit 0
    (harness/run/rounds.py: the pytest plugin's rule)."""
    from harness.run.rounds import inconclusive_line

    def run(args: argparse.Namespace) -> int:
        args.reruns, args.whys = 0, {}
        code = once(args)
        while _unknown(args) and args.reruns < getattr(args, "rerun_unknown", 0):
            args.reruns += 1
            err.print(
                f"[yellow]unknown verdict:[/] re-run {args.reruns} of {args.rerun_unknown} (--rerun-unknown)"
            )
            args.outcomes, args.whys = [o for o in args.outcomes if o[1] != "unknown"], {}
            code = once(args)
        if not _unknown(args):
            return code
        why = "; ".join(args.whys.values())
        skip = getattr(args, "unknown", "fail") == "skip"
        line = inconclusive_line(why, args.reruns) + (" (skipped: --unknown skip)" if skip else "")
        err.print(f"[yellow]{escape(line)}[/]", soft_wrap=True, highlight=False)
        return 0 if skip else 2

    return run


def _unknown(args: argparse.Namespace) -> bool:
    return any(o[1] == "unknown" for o in getattr(args, "outcomes", None) or [])


def rounds(args: argparse.Namespace, once: Callable[[argparse.Namespace], int]) -> int:
    """--rounds N: the command N times (seed +1 each round), tallied per scenario or fault row;
    exit 1 when a round failed, 2 when one could not run or was inconclusive."""
    import contextlib

    from harness.run.rounds import Round, Tally, write_json

    n = getattr(args, "rounds", 1)
    if n == 1:
        args.outcomes = []
        code = once(args)
        write_scorecard(args, [o[2] for o in args.outcomes])
        return code
    base, worst = args.seed, 0
    run_dirs: list[Path | None] = []
    junit = getattr(args, "junitxml", None)
    tallies: dict[str, Tally] = {}
    for i in range(n):
        args.seed, args.outcomes = base + i, []
        if junit:  # one JUnit file per round (the index and JSON are per run already)
            args.junitxml = str(round_path(Path(junit), i + 1))
        err.rule(f"[bold]round {i + 1}/{n}[/] (seed {args.seed})")
        with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
            worst = max(worst, 2 if once(args) == 2 else 0)  # could not run, or inconclusive
        run_dirs += [o[2] for o in args.outcomes]
        for name, verdict, run_dir, message in args.outcomes:
            replay = " ".join(["bfh", *without_rounds(sys.argv[1:]), "--seed", str(args.seed)])
            why = (getattr(args, "whys", None) or {}).get(name, "")
            r = Round(i, verdict, run_dir, replay, message, getattr(args, "reruns", 0), why)
            tallies.setdefault(name, Tally(name, unknown=getattr(args, "unknown", "fail"))).rounds.append(r)
    out = write_json(list(tallies.values()), Path(args.reports))
    if args.json:
        print(json.dumps([t.to_dict() for t in tallies.values()], indent=2))
    for t in tallies.values():
        err.print(escape(t.message() if t.failures else t.line()), soft_wrap=True, highlight=False)
    err.print(f"rounds: {out}")
    write_scorecard(args, run_dirs)
    return worst or (1 if any(t.failures for t in tallies.values()) else 0)


def write_scorecard(args: argparse.Namespace, run_dirs: Sequence[Path | None]) -> None:
    """The command's scorecard (bfh-scorecard/1, docs/compare.md) of the runs it judged: --scorecard
    PATH, default <--reports>/scorecard.json (`none`: not written). Read from the run folders only."""
    from harness.contracts.scorecard import FILE_NAME, ScorecardError, save
    from harness.verdict.scorecard import scorecard_from_runs

    path = getattr(args, "scorecard", None) or str(Path(getattr(args, "reports", "reports")) / FILE_NAME)
    dirs = [d for d in run_dirs if d is not None and (d / "run.json").is_file()]
    if path.lower() == "none" or not dirs:
        return
    source = "bfh validate" if getattr(args, "cmd", "") == "validate" else "bfh run"
    try:
        card = scorecard_from_runs(dirs, source, getattr(args, "agent_version", None) or "")
        err.print(f"scorecard: {save(card, path)}")
    except (OSError, ScorecardError) as e:
        err.print(f"[yellow]scorecard not written:[/] {escape(str(e))}")


def round_path(path: Path, round_no: int) -> Path:
    """`out.xml` -> `out.round-2.xml` (stdout stays stdout)."""
    if str(path) == "-":
        return path
    return path.with_name(f"{path.stem}.round-{round_no}{path.suffix}")


def without_rounds(argv: list[str]) -> list[str]:
    """The command line without --rounds/--seed (the replay gives the round's own seed)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--rounds", "--seed"):
            skip = True
        elif not a.startswith(("--rounds=", "--seed=")):
            out.append(shlex.quote(a))
    return out


def exit_code(verdict: str) -> int:
    """0 pass or n/a, 1 fail, 2 unknown (a checker crashed: the run was not judged)."""
    return {"fail": 1, "unknown": 2}.get(verdict, 0)


def names(text: str | None) -> list[str] | None:
    return [n.strip() for n in text.split(",") if n.strip()] if text else None


def error(text: str) -> None:
    """One line on stderr: `error: ...` (a path with a newline in it stays on the line)."""
    line = " ".join(str(text).split())
    err.print(f"[red]error:[/] {escape(line)}", soft_wrap=True, highlight=False)


def crash(e: BaseException) -> str:
    return " ".join(f"{type(e).__name__}: {e}".split())[:300]


#: the output options each command writes to (a folder; --junitxml a file), checked before it starts
OUTPUTS = {
    "demo": ("reports",),
    "run": ("reports", "scorecard"),
    "validate": ("reports", "junitxml", "scorecard"),
    "up": ("reports",),
    "down": ("reports",),
    "status": ("reports",),
    "compose": ("out",),
    "agent": ("reports",),
}


def output_problem(args: argparse.Namespace) -> str | None:
    """Why one of the command's output options cannot be used (one line), or None; found before
    anything starts, so a bad path leaves no broker, proxy or folder behind."""
    for opt in OUTPUTS.get(getattr(args, "cmd", ""), ()):
        value = getattr(args, opt, None)
        if value is None or getattr(args, "list", False):
            continue
        if opt == "scorecard":  # written last; its folders made
            why = None if value.lower() == "none" else scorecard_problem(Path(value))
        elif opt == "junitxml":
            why = file_problem(Path(value), Path(getattr(args, "reports", None) or "reports"))
        else:
            why = folder_problem(Path(value), write=args.cmd not in ("down", "status"))
        if why:
            return f"--{opt} {value}: {why}"
    return None


def scorecard_problem(path: Path) -> str | None:
    """--scorecard PATH: the writer makes its missing folders."""
    from harness.contracts.outfile import own_fd

    if own_fd(path) is None and not os.path.lexists(path) and not path.parent.is_dir():
        return folder_problem(path.parent)
    return file_problem(path)


def folder_problem(path: Path, write: bool = True) -> str | None:
    """Why `path` cannot be (made) a folder to write in; probes the nearest existing folder with a
    scratch folder it removes (a root can write almost anywhere, but not in /proc)."""
    probe = path
    while True:
        try:
            os.stat(probe)
            break
        except (FileNotFoundError, NotADirectoryError):
            if probe == probe.parent:
                return "no folder of it exists"
            probe = probe.parent
        except OSError as e:
            return f"cannot use it ({e.strerror})"
    if not probe.is_dir():
        return f"{probe} is not a folder"
    if write:
        try:
            os.rmdir(tempfile.mkdtemp(prefix=".bfh-probe-", dir=probe))
        except OSError as e:
            return f"cannot write in {probe} ({e.strerror})"
    return None


def file_problem(path: Path, made: Path | None = None) -> str | None:
    """Why a file cannot be written at `path`: its folder must exist, or be `made` (the reports
    folder, which the run makes); a device, FIFO or symlink is written through or refused, never
    replaced (harness/contracts/outfile.py)."""
    from harness.contracts.outfile import problem

    why = problem(path, made)
    if why is None and made is not None and not path.parent.is_dir():
        return folder_problem(path.parent)  # the run makes it before the file is written
    return why
