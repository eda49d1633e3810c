"""Reading a user's input file (topology, schedule, xml_file, config:) safely: a regular file of
bounded size, or one line saying why not. A FIFO would hang, /dev/zero would never end, and
`~nosuchuser/` or a symlink loop would raise a traceback."""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_INPUT_BYTES = 4 << 20  # far above any real topology, schedule or activemq.xml


class InputFileError(ValueError):
    """A file that cannot be used as input; the message is one line and names the fix."""


def expand(path: str | Path) -> Path:
    """`~/x` expanded; `~nosuchuser/x` refused with an InputFileError."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        raise InputFileError(f"{path}: cannot expand '~' (no such user or home directory)") from None


def check_input(path: str | Path, max_bytes: int = MAX_INPUT_BYTES) -> Path:
    """`path` if it is a regular file of at most `max_bytes`; InputFileError (one line) if not."""
    p = expand(path)
    try:
        st = os.stat(p)  # follows symlinks; a loop is ELOOP
    except OSError as e:
        raise InputFileError(f"{p}: cannot read ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputFileError(f"{p}: {_kind(st.st_mode)}; give a regular file")
    if st.st_size > max_bytes:
        raise InputFileError(f"{p}: larger than the {max_bytes >> 20} MB an input may have")
    return p


def _kind(mode: int) -> str:
    return "a directory" if stat.S_ISDIR(mode) else "not a regular file (a FIFO, socket or device)"


def read_input(path: str | Path, max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file of at most `max_bytes` (opened without blocking on a FIFO)."""
    p = expand(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise InputFileError(f"{p}: cannot read ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputFileError(f"{p}: {_kind(st.st_mode)}; give a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    except OSError as e:
        raise InputFileError(f"{p}: cannot read ({e.strerror or e})") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise InputFileError(f"{p}: larger than the {max_bytes >> 20} MB an input may have")
    return data


def read_text(path: str | Path, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """read_input decoded as UTF-8 (InputFileError if it is not)."""
    data = read_input(path, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputFileError(f"{path}: not a UTF-8 text file") from None
