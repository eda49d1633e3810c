"""SIGTERM or Ctrl-C while `bfh` waits on Spark prints one line: py4j logs the KeyboardInterrupt
that stops its call with a whole traceback (`ERROR:root:KeyboardInterrupt while sending command`),
which bfh's filter drops; any other error it logs still shows. In its own interpreter (the root
logger's filters are process-wide)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

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


RUN = Path(__file__).resolve().parents[1] / "fixtures/rejudge/20261126-144907-masterslave-fb73"


@pytest.mark.spark
def test_sigterm_while_the_jvm_starts_prints_one_line_and_leaves_no_jvm(tmp_path: Path) -> None:
    """`bfh reconcile` stopped while its local Spark JVM starts: one line, and the JVM (started
    from a thread that waits for its port) is not left behind."""
    run = tmp_path / RUN.name
    shutil.copytree(RUN, run)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BFH_SPARK_", "SPARK_CONNECT"))}
    proc = psutil.Popen(
        [sys.executable, "-m", "harness.cli.main", "reconcile", str(run)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    jvms: list[psutil.Process] = []
    deadline = time.monotonic() + 120
    while not jvms and time.monotonic() < deadline and proc.poll() is None:
        jvms = [c for c in proc.children(recursive=True) if "java" in c.name()]
        time.sleep(0.02)
    assert jvms, "no JVM was started"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode in (130, 143), err
    assert len(err.strip().splitlines()) == 1, err
    gone, alive = psutil.wait_procs(jvms, timeout=10)
    assert not alive, [p.cmdline()[:3] for p in alive]
