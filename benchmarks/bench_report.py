"""Benchmark: the report of a 1,000-member fleet in Chromium (issue 44 item 6).

    BFH_REPORT_MEMBERS=1000 pytest benchmarks/bench_report.py -m benchmark -s -p no:xdist

A generated fleet run folder (tests/report/fleetfolder.py: 1,000 members, a kill of the master,
25,000 deliveries) is judged and reported (`bfh judge`, `bfh report`, timed), then opened 3 times
in headless Chromium (Debian's `chromium`, installed by scripts/setup.sh). The load time is the
page's own navigation timing, navigation start to the load event (a copy of report.html with one
script that writes `performance.getEntriesByType("navigation")[0].loadEventStart` into the DOM,
read back with --dump-dom); the wall time of the whole headless Chromium process (start-up
included) and of the same process on an empty page are printed beside it. Medians of 3. Run it
under the shared lock (`flock /tmp/bfh-heavy.lock ...`): Chromium takes both cores for a moment.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.report.fleetfolder import write_fleet_folder  # noqa: E402

BFH = str(REPO / ".venv" / "bin" / "bfh")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking")
PROBE = (
    '<script>addEventListener("load", () => { const t = performance.getEntriesByType("navigation")[0];'
    " document.documentElement.dataset.loadMs = Math.round(t.loadEventStart); });</script></body>"
)


def _open(page: Path, profile: Path) -> tuple[float, int | None]:
    """(wall seconds of a headless Chromium dumping the page, the page's load event in ms)."""
    exe = shutil.which("chromium")
    assert exe, "chromium is not installed (scripts/setup.sh installs it)"
    t = time.monotonic()
    p = subprocess.run(
        [exe, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    wall = time.monotonic() - t
    m = re.search(r'data-load-ms="(\d+)"', p.stdout)
    return wall, int(m[1]) if m else None


def _timed(cmd: list[str]) -> float:
    t = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-1000:] + p.stderr[-1000:]
    return time.monotonic() - t


@pytest.mark.benchmark
def test_fleet_report_opens_fast(tmp_path: Path) -> None:
    members = int(os.environ.get("BFH_REPORT_MEMBERS", "1000"))
    run_dir = tmp_path / f"20990101-000000-fleet-masterslave-{members}"
    info = write_fleet_folder(run_dir, members=members)
    judge_s = _timed([BFH, "judge", str(run_dir)])
    report_s = _timed([BFH, "report", str(run_dir)])
    html = run_dir / "report.html"
    size = html.stat().st_size
    probe = tmp_path / "report-timed.html"  # beside nothing: the page's links are not followed
    probe.write_text(html.read_text(encoding="utf-8").replace("</body>", PROBE, 1), encoding="utf-8")
    empty = tmp_path / "empty.html"
    empty.write_text(f"<!DOCTYPE html><html><body>x{PROBE}</html>", encoding="utf-8")
    _open(empty, tmp_path / "profile")  # a first start writes the profile: not measured
    runs = [_open(probe, tmp_path / "profile") for _ in range(3)]
    base = [_open(empty, tmp_path / "profile")[0] for _ in range(3)]
    loads = [ms for _, ms in runs if ms is not None]
    assert len(loads) == 3, runs
    print(
        f"\nfleet report at {members} members ({info['deliveries']} deliveries, folder "
        f"{info['bytes'] / 1e6:.1f} MB): judge {judge_s:.1f} s, report {report_s:.1f} s, "
        f"report.html {size / 1e6:.2f} MB; Chromium load event {loads} ms, median "
        f"{statistics.median(loads):.0f} ms; headless process wall {[round(w, 2) for w, _ in runs]} s "
        f"(median {statistics.median(w for w, _ in runs):.2f} s; an empty page: median "
        f"{statistics.median(base):.2f} s)"
    )
    assert size < 5_000_000
    assert statistics.median(loads) < 3000
