"""A file a command writes where the user said (`--json`, `--html`, `--junitxml`, `--scorecard`) or
in its own folders: one check and one writer, so a device, a FIFO or a symlink is written through
or refused, never replaced by the writer's rename (docs/compare.md, "Outputs").

    problem(path, made=None) -> str | None   why `path` cannot be written (one line), asked before
                                             anything starts
    write_text(path, text) -> Path           the text at `path`, whole or not at all

What `path` names, symlinks followed:
- `-`, /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: this process's own open file,
  written through (a pipe, a terminal, a file the shell opened: `--json >(jq .)` works);
- a character device (/dev/null, a terminal): written through, never replaced;
- a FIFO, a socket, a block device, a folder: refused (a FIFO nobody reads would hang the command);
- a regular file or nothing yet: a temporary file beside it, renamed over it, so a reader never
  sees half of it; through a symlink, beside the file the link names, and the link stays.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
import tempfile
from pathlib import Path

STDOUT = "-"
_STD = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
_HOPS = 40  # symlinks followed before giving up (the kernel's own limit)


class OutputError(OSError):
    """A path no output may be written to (its `strerror` is the one-line reason)."""

    def __init__(self, why: str) -> None:
        super().__init__(errno.EINVAL, why)


def own_fd(path: Path | str) -> int | None:
    """The file descriptor `path` names when it is one of this process's own open files
    (`-`, /dev/stdout, /dev/fd/N, /proc/self/fd/N, or a symlink to one), else None."""
    if str(path) == STDOUT:
        return 1
    p = os.path.abspath(path)
    own = rf"/(?:proc/(?:self|thread-self|{os.getpid()})/fd|dev/fd)/(\d+)"
    for _ in range(_HOPS):
        if p in _STD:
            return _STD[p]
        m = re.fullmatch(own, p)
        if m:
            return int(m.group(1))
        try:
            p = os.path.normpath(os.path.join(os.path.dirname(p), os.readlink(p)))
        except OSError:  # not a symlink (or not ours to read): a file of its own
            return None
    return None


def _kind(mode: int) -> str | None:
    """Why a file of this kind is refused, or None (a regular file or a character device)."""
    if stat.S_ISREG(mode) or stat.S_ISCHR(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a folder; give a file name"
    what = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a block device"
    return f"is {what}: give a regular file, or - for stdout"


def problem(path: Path | str, made: Path | None = None) -> str | None:
    """Why a file cannot be written at `path` (one line), or None. Its folder must exist, or be
    `made` (the reports folder, which the run makes before it writes the file)."""
    fd = own_fd(path)
    if fd is not None:
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            return f"file descriptor {fd} is not open"
        return _kind(mode) if stat.S_ISDIR(mode) else None
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        return f"cannot use it ({e.strerror or e})"
    if st is not None:
        why = _kind(st.st_mode)
        if why:
            return why
        try:
            if stat.S_ISCHR(st.st_mode):  # written through: it must open for writing
                os.close(os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK))
                return None
            with path.open("ab"):  # opened for append, not changed
                pass
        except OSError as e:
            return f"cannot write it ({e.strerror or e})"
    target = Path(os.path.realpath(path))  # a symlink's file is written beside what it names
    folder = target.parent
    if not folder.is_dir():
        if made is not None and folder == Path(os.path.realpath(made)):
            return None  # made by the command, checked as a folder by the caller
        return f"{folder} is not a folder" if os.path.lexists(folder) else "its folder does not exist"
    try:  # the writer puts a temporary file beside it
        scratch_fd, scratch = tempfile.mkstemp(prefix=".bfh-probe-", dir=folder)
        os.close(scratch_fd)
        os.unlink(scratch)
    except OSError as e:
        return f"cannot write it ({e.strerror or e})"
    return None


def _write_fd(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_text(path: Path | str, text: str) -> Path:
    """Write `text` to `path` as the module docstring says; OSError (OutputError for a kind of
    file refused) when it cannot."""
    fd = own_fd(path)
    if fd is not None:
        stream = {1: sys.stdout, 2: sys.stderr}.get(fd)
        if stream is not None:
            stream.write(text)
            stream.flush()
        else:
            _write_fd(fd, text.encode("utf-8"))
        return Path(path)
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and (why := _kind(mode)):
        raise OutputError(f"{path} {why}")
    if mode is not None and stat.S_ISCHR(mode):
        dev = os.open(path, os.O_WRONLY | os.O_NOCTTY)
        try:
            _write_fd(dev, text.encode("utf-8"))
        finally:
            os.close(dev)
        return path
    target = Path(os.path.realpath(path))
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return path
