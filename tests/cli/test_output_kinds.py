"""Every output option on a device, a FIFO or a symlink (issue 59): written through (stdout, `-`,
/dev/null, a symlink's file) or refused in one line with exit 2; never replaced by the writer's
rename. /dev/full is only ever reached through a symlink made here, and checked afterwards."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.contracts import outfile
from tests.cli.support import ROOT, bfh
from tests.compare.cards import REF, SLOW, card, recovery

OPTIONS = ("--json", "--junitxml", "--html")


@pytest.fixture
def sides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "old.json").write_text(json.dumps(card(recovery(REF))))
    (tmp_path / "new.json").write_text(json.dumps(card(recovery(SLOW))))
    return str(tmp_path / "old.json"), str(tmp_path / "new.json")


def _dev_full_is_intact() -> None:
    st = os.lstat("/dev/full")
    assert stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 1 and os.minor(st.st_rdev) == 7


@pytest.mark.parametrize("opt", OPTIONS)
def test_a_full_device_is_written_through_and_refused_by_its_error(
    sides: tuple[str, str], tmp_path: Path, opt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    full = tmp_path / "full"
    full.symlink_to("/dev/full")
    assert main(["compare", *sides, opt, str(full)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0] == f"error: {opt} {full}: cannot write it (No space left on device)"
    assert full.is_symlink() and os.readlink(full) == "/dev/full"
    _dev_full_is_intact()


@pytest.mark.parametrize("opt", OPTIONS)
def test_a_fifo_is_refused_before_the_comparison_without_hanging(
    sides: tuple[str, str], tmp_path: Path, opt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    assert main(["compare", *sides, opt, str(fifo)]) == 2 and time.monotonic() - t0 < 30
    out = capsys.readouterr()
    assert out.err.strip() == f"error: {opt} {fifo}: is a FIFO: give a regular file, or - for stdout"
    assert out.out == ""  # refused before anything is read
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.parametrize("opt", OPTIONS)
def test_dev_null_and_dev_stdout_are_written_through(
    sides: tuple[str, str], tmp_path: Path, opt: str
) -> None:
    null = tmp_path / "null"
    null.symlink_to("/dev/null")
    assert main(["compare", *sides, opt, str(null)]) == 1  # the comparison's own exit code
    assert null.is_symlink() and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    p = bfh("compare", *sides, opt, "/dev/stdout", timeout=120)
    assert p.returncode == 1, p.stderr
    assert ("bfh-compare/1" if opt == "--json" else "masterslave") in p.stdout
    assert stat.S_ISLNK(os.lstat("/dev/stdout").st_mode)


@pytest.mark.parametrize("opt", OPTIONS)
def test_dash_is_stdout_and_the_table_goes_to_stderr(
    sides: tuple[str, str], opt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", *sides, opt, "-"]) == 1
    out = capsys.readouterr()
    assert ("bfh-compare/1" if opt == "--json" else "recovery_s") in out.out
    assert "regression: masterslave recovery_s" in out.err and not Path("-").exists()


def test_two_outputs_on_stdout_are_refused(
    sides: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", *sides, "--json", "-", "--html", "-"]) == 2
    assert "--json and --html both name stdout" in capsys.readouterr().err


@pytest.mark.parametrize("opt", OPTIONS)
def test_a_symlink_to_a_file_stays_and_its_file_is_written(
    sides: tuple[str, str], tmp_path: Path, opt: str
) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "out"
    target.write_text("old")
    link = tmp_path / "link"
    link.symlink_to(target)
    assert main(["compare", *sides, opt, str(link)]) == 1
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() != "old" and target.stat().st_size > 100


@pytest.mark.parametrize(
    "command",
    [
        "run masterslave --topology pair --reports {tmp}/r --scorecard {fifo}",
        "validate pair --reports {tmp}/r --scorecard {fifo}",
        "validate pair --reports {tmp}/r --junitxml {fifo}",
        "validate pair --reports {tmp}/r --junitxml {tmp}/sock",
    ],
)
def test_run_and_validate_refuse_a_fifo_before_anything_starts(tmp_path: Path, command: str) -> None:
    import socket

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(tmp_path / "sock"))
    try:
        p = bfh(*command.format(tmp=tmp_path, fifo=fifo).split(), timeout=60)
    finally:
        s.close()
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "give a regular file, or - for stdout" in lines[0], p.stderr
    assert not (tmp_path / "r").exists()


def test_a_closed_pipe_ends_quietly(sides: tuple[str, str]) -> None:
    """`bfh compare ... --json - | head -1`: the reader gone, no BrokenPipeError traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli.main", "compare", *sides, "--json", "-"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader has gone before the first byte
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in err and "BrokenPipe" not in err, err


# -- the writer itself -------------------------------------------------------------------------
def test_the_writer_refuses_what_it_cannot_write_through(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(outfile.OutputError, match="is a FIFO"):
        outfile.write_text(fifo, "x")
    with pytest.raises(outfile.OutputError, match="is a folder"):
        outfile.write_text(tmp_path, "x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    full = tmp_path / "full"
    full.symlink_to("/dev/full")
    with pytest.raises(OSError, match="No space left"):
        outfile.write_text(full, "x")
    _dev_full_is_intact()
    assert outfile.problem(tmp_path / "nodir" / "x") == "its folder does not exist"
    assert outfile.problem(full) is None  # a character device opens: its error comes on writing


def test_the_writer_knows_this_processs_own_files() -> None:
    assert outfile.own_fd("-") == 1 and outfile.own_fd("/dev/stdout") == 1
    assert outfile.own_fd("/dev/fd/7") == 7 and outfile.own_fd(f"/proc/{os.getpid()}/fd/5") == 5
    assert outfile.own_fd("/dev/null") is None and outfile.own_fd("/proc/1/fd/1") is None


def test_a_closed_pipe_after_reconcile_help_ends_quietly() -> None:
    """`bfh reconcile --help | head -1`: its own parser, the same quiet end."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli.main", "reconcile", "--help"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_version_names_the_installed_package() -> None:
    p = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "--version"], cwd=ROOT, capture_output=True, text=True
    )
    assert p.returncode == 0 and re.fullmatch(r"bfh \d+\.\d+\.\d+\n", p.stdout), p
