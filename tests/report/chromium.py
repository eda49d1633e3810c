"""Headless Chromium (Debian's `chromium`) as a page checker: DOM after scripts ran, console lines
and a screenshot, without a driver (the console goes to stderr with --enable-logging)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking")


@dataclass
class Page:
    dom: str
    console: list[str]  # every console message the page produced (errors, uncaught exceptions...)


def chromium() -> str | None:
    return shutil.which("chromium")


def load(html: Path, screenshot: Path | None = None, timeout: float = 60) -> Page:
    exe = chromium()
    assert exe, "chromium is not installed (scripts/setup.sh installs it)"
    url = html.resolve().as_uri()
    base = [exe, *FLAGS, "--enable-logging=stderr", "--v=0", f"--user-data-dir={html.parent / '.chromium'}"]
    p = subprocess.run(
        [*base, "--dump-dom", url], capture_output=True, text=True, timeout=timeout, check=False
    )
    console = [line for line in p.stderr.splitlines() if ":CONSOLE" in line]
    if screenshot is not None:
        subprocess.run(
            [*base, "--window-size=1100,1600", f"--screenshot={screenshot}", url],
            capture_output=True,
            timeout=timeout,
            check=True,
        )
    return Page(p.stdout, console)
