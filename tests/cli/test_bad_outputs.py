"""Output folders and files the commands cannot write (issue 40): `bfh compose --out` naming a file
or /proc/self, `bfh run --reports /dev/null/x`, `--junitxml` where no file can go, ... Each is
exit 2 and one `error:` line naming the option, before anything starts: no traceback, no process
and no folder left behind. Checked through the real `bfh` in a child process."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import pytest

from harness.cli.common import file_problem, folder_problem, output_problem
from tests.cli.support import bfh


def _processes_naming(text: str) -> list[int]:
    """Processes whose command line names `text` (a broker, proxy or agent of this test's folder)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if text in (d / "cmdline").read_bytes().decode(errors="replace"):
                    out.append(int(d.name))
            except OSError:
                continue
    return [pid for pid in out if pid != os.getpid()]


CASES = [
    ("compose pair --out {file}", "--out"),
    ("compose pair --out {file}/sub", "--out"),
    ("compose pair --out /proc/self", "--out /proc/self"),
    ("compose pair --out /dev/null/x", "--out /dev/null/x"),
    ("run masterslave --topology pair --reports /dev/null/x", "--reports /dev/null/x"),
    ("run masterslave --topology pair --reports {file}", "--reports"),
    ("run --schedule s.json --reports /proc/self", "--reports /proc/self"),
    ("validate pair --reports {file}/r", "--reports"),
    ("validate pair --reports {tmp}/r --junitxml /dev/null/x.xml", "--junitxml /dev/null/x.xml"),
    ("validate pair --reports {tmp}/r --junitxml {tmp}", "--junitxml"),
    ("validate pair --reports {tmp}/r --junitxml {tmp}/nodir/v.xml", "its folder does not exist"),
    ("validate pair --reports {tmp}/r --junitxml /proc/self/v.xml", "--junitxml /proc/self/v.xml"),
    ("validate pair --rounds 2 --reports /dev/null/x", "--reports /dev/null/x"),
    ("demo --reports /proc/self", "--reports /proc/self"),
    ("up pair --reports {file}", "--reports"),
    ("down --reports /dev/null/x", "--reports /dev/null/x"),
    ("status --reports {file}", "--reports"),
]


@pytest.mark.parametrize("command,names", CASES, ids=[c for c, _ in CASES])
def test_an_output_that_cannot_be_written_is_one_line_before_anything_starts(
    tmp_path: Path, command: str, names: str
) -> None:
    (tmp_path / "afile").write_text("kept\n")
    argv = command.format(file=tmp_path / "afile", tmp=tmp_path).split()
    before = sorted(tmp_path.rglob("*"))
    t0 = time.monotonic()
    p = bfh(*argv, timeout=120)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr + p.stdout
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --"), p.stderr
    assert names in lines[0], lines[0]
    assert time.monotonic() - t0 < 60  # refused up front, not after a run
    assert sorted(tmp_path.rglob("*")) == before  # no folder, no probe left
    assert (tmp_path / "afile").read_text() == "kept\n"
    assert not _processes_naming(str(tmp_path))


def test_outputs_that_can_be_written_pass(tmp_path: Path) -> None:
    assert folder_problem(tmp_path / "new" / "deeper") is None  # made by the command
    assert file_problem(tmp_path / "v.xml") is None
    (tmp_path / "old.xml").write_text("x")
    assert file_problem(tmp_path / "old.xml") is None and (tmp_path / "old.xml").read_text() == "x"
    # --junitxml inside the reports folder the run makes
    reports = tmp_path / "reports"
    args = argparse.Namespace(cmd="validate", reports=str(reports), junitxml=str(reports / "junit.xml"))
    assert output_problem(args) is None
    assert sorted(tmp_path.iterdir()) == [tmp_path / "old.xml"]
    assert output_problem(argparse.Namespace(cmd="run", reports="/dev/null/x", list=True)) is None
