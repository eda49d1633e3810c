"""scripts/setup.sh on a busy runner: every apt-get waits for the dpkg lock (issue 42 item 4)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

SETUP = Path(__file__).resolve().parents[2] / "scripts" / "setup.sh"


def test_every_apt_call_waits_for_the_dpkg_lock() -> None:
    text = SETUP.read_text()
    calls = [
        ln for ln in text.splitlines() if re.search(r"\bapt-get\b", ln) and not ln.lstrip().startswith("#")
    ]
    assert calls, "setup.sh installs Debian packages through apt-get"
    for ln in calls:
        assert "DPkg::Lock::Timeout=" in ln or '"${APT[@]}"' in ln, ln
    assert re.search(r"APT=\(apt-get -o DPkg::Lock::Timeout=\d+\)", text)


def test_apt_accepts_the_lock_timeout_option() -> None:
    # apt-get parses -o before doing anything: a typo in the option's name would be silently ignored,
    # so check that apt itself reads the value back
    out = subprocess.run(
        ["apt-config", "-o", "DPkg::Lock::Timeout=600", "dump", "DPkg::Lock::Timeout"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert 'DPkg::Lock::Timeout "600";' in out
