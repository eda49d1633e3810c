"""SIGTERM or Ctrl-C while `bfh` waits on Spark prints one line: py4j logs the KeyboardInterrupt
that stops its call with a whole traceback (`ERROR:root:KeyboardInterrupt while sending command`),
which bfh's filter drops; any other error it logs still shows. In its own interpreter (the root
logger's filters are process-wide)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import logging
from harness.cli.main import _quiet_interrupts

_quiet_interrupts()
for exc in (KeyboardInterrupt, ValueError):
    try:
        raise exc("boom")
    except BaseException:
        logging.exception("%s while sending command", exc.__name__)
"""


def test_an_interrupts_traceback_is_dropped_any_other_error_kept() -> None:
    p = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True)
    assert "KeyboardInterrupt" not in p.stderr, p.stderr
    assert "ERROR:root:ValueError while sending command" in p.stderr and "ValueError: boom" in p.stderr
