"""Fuzz `bfh compare`'s inputs and every output option of every command (issue 59).

Inputs: a scorecard mutated at random paths (values replaced with hostile scalars: NaN, Infinity,
huge ints, strings, ...; keys deleted, added, items duplicated) is compared with the reference:
the outcome is a comparison (exit 0, 1 or 2) or one CompareError line, never another exception; a
side with no judged round is never exit 0, nor a NEW side with a measure at Infinity.

Outputs: each output option (compare --json/--junitxml/--html, validate --junitxml, run and
validate --scorecard) on each kind of path (FIFO, socket, folder, symlinks to /dev/full, /dev/null,
a file, nowhere or themselves, a missing folder, a file): the up-front check refuses it in one line
or the writer writes it through; a FIFO, socket, symlink or device is never replaced."""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from harness.cli.common import output_problem
from harness.compare import CompareError, compare
from harness.contracts import outfile
from tests.compare.cards import REF, card, recovery
from tests.fuzz.common import FUZZ, Tally, mutated

BASE = card(recovery(REF, publish_latency_p95_s=lambda i: [0.02 + 0.001 * i]))
KEYS = ["verdict", "measures", "promises", "seed", "run_id", "entries", "rounds", "recovery_s[publisher]"]
TALLY = Tally()


def _judged(side: Any) -> bool:
    try:
        return any(r.get("verdict") not in ("error", "unknown") for e in side["entries"] for r in e["rounds"])
    except (TypeError, KeyError, AttributeError):
        return False


def _infinite_new(side: Any) -> bool:
    try:
        return any(
            isinstance(v, float) and v == math.inf
            for e in side["entries"]
            for r in e["rounds"]
            for vs in (r.get("measures") or {}).values()
            for v in (vs if isinstance(vs, list) else [vs])
        )
    except (TypeError, KeyError, AttributeError):
        return False


@FUZZ
@given(doc=mutated(BASE, KEYS))
def test_a_mutated_scorecard_is_compared_or_refused_in_one_line(doc: Any) -> None:
    TALLY["cases"] += 1
    with tempfile.TemporaryDirectory() as tmp:  # through a file, as `bfh compare` reads a side
        side = Path(tmp) / "new.json"
        side.write_text(json.dumps(doc))
        _compare(doc, side)


def _compare(doc: Any, side: Path) -> None:
    try:
        c = compare(BASE, side)
    except CompareError as e:
        TALLY["refused"] += 1
        assert "\n" not in str(e).strip()
        return
    TALLY[f"exit {c.exit_code}"] += 1
    assert c.exit_code in (0, 1, 2)
    json.dumps(c.to_dict())  # every output can be made
    if not _judged(doc) or _infinite_new(doc):
        assert c.exit_code != 0, c.summary()


def test_the_fuzz_tally() -> None:
    print(TALLY.report("compare inputs"))


# -- every output option on every kind of path -----------------------------------------------
KINDS = ["fifo", "socket", "folder", "full", "null", "to-file", "dangling", "loop", "nodir", "file"]
#: (command, option): how each output option is checked before the command starts
OPTIONS = [
    ("compare", "json"),
    ("compare", "junitxml"),
    ("compare", "html"),
    ("validate", "junitxml"),
    ("validate", "scorecard"),
    ("run", "scorecard"),
]


def _make(tmp: Path, kind: str) -> tuple[Path, list[socket.socket]]:
    p, keep = tmp / "out", []
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(p))
        keep.append(s)
    elif kind == "folder":
        p.mkdir()
    elif kind == "full":
        p.symlink_to("/dev/full")
    elif kind == "null":
        p.symlink_to("/dev/null")
    elif kind == "to-file":
        (tmp / "real").write_text("old")
        p.symlink_to(tmp / "real")
    elif kind == "dangling":
        p.symlink_to(tmp / "nowhere" / "x")
    elif kind == "loop":
        p.symlink_to(p)
    elif kind == "nodir":
        p = tmp / "nodir" / "out"
    elif kind == "file":
        p.write_text("old")
    return p, keep


def _problem(command: str, option: str, path: Path, tmp: Path) -> str | None:
    if command == "compare":  # bfh compare checks its own three (harness/cli/commands_compare.py)
        from harness.cli.common import file_problem

        return file_problem(path)
    args = argparse.Namespace(cmd=command, reports=str(tmp / "reports"), junitxml=None, scorecard=None)
    setattr(args, option, str(path))
    return output_problem(args)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command,option", OPTIONS, ids=[f"{c}--{o}" for c, o in OPTIONS])
def test_an_output_is_refused_or_written_through_never_replaced(
    tmp_path: Path, command: str, option: str, kind: str
) -> None:
    path, keep = _make(tmp_path, kind)
    try:
        before = os.lstat(path).st_mode if os.path.lexists(path) else None
        why = _problem(command, option, path, tmp_path)
        if why is not None:
            assert "\n" not in why
        else:
            try:
                outfile.write_text(path, '{"x": 1}\n')
            except OSError as e:
                assert e.strerror  # one line for the command to print
        if before is not None and not stat.S_ISREG(before):
            assert stat.S_IFMT(os.lstat(path).st_mode) == stat.S_IFMT(before), kind  # not replaced
        if kind in ("fifo", "socket", "folder", "loop"):
            assert why is not None, kind  # refused up front
        if kind == "to-file" and why is None:
            assert (tmp_path / "real").read_text() == '{"x": 1}\n'
    finally:
        for s in keep:
            s.close()
    st_full = os.lstat("/dev/full")
    assert stat.S_ISCHR(st_full.st_mode) and os.minor(st_full.st_rdev) == 7


# -- a side that is not a scorecard ------------------------------------------------------------
SIDES = ["fifo", "dev-zero", "huge", "loop", "empty-folder", "fifo-run-json", "fifo-verdict", "not-json"]


def _side(tmp: Path, kind: str) -> Path:
    p = tmp / "side"
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "dev-zero":
        p.symlink_to("/dev/zero")
    elif kind == "huge":
        with p.open("wb") as f:
            f.truncate(100 << 20)
    elif kind == "loop":
        p.symlink_to(p)
    elif kind == "empty-folder":
        p.mkdir()
    elif kind == "fifo-run-json":
        (p / "run").mkdir(parents=True)
        os.mkfifo(p / "run" / "run.json")
    elif kind == "fifo-verdict":
        (p / "analysis").mkdir(parents=True)
        (p / "run.json").write_text('{"run": "r1", "seed": 1}')
        os.mkfifo(p / "analysis" / "verdict.json")
    else:
        p.write_text("{" * 100_000)
    return p


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", SIDES)
def test_a_side_that_is_no_scorecard_is_one_line_never_read(tmp_path: Path, kind: str) -> None:
    with pytest.raises(CompareError) as e:
        compare(BASE, _side(tmp_path, kind))
    assert "\n" not in str(e.value).strip() and str(tmp_path) in str(e.value)
