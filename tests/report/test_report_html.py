"""The HTML report of a real run (one real pair, kill -9 of the master), loaded in headless Chromium."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from harness.agents.launch import agent_factory
from harness.faults.schedule import Schedule, Step
from harness.report.html import render_report
from harness.run.runner import execute
from harness.topology import builtin_topology
from tests.report.chromium import chromium, load

pytestmark = [pytest.mark.broker, pytest.mark.spark]
needs_chromium = pytest.mark.skipif(chromium() is None, reason="chromium not installed (scripts/setup.sh)")


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real ~20 s run: kill the master 3 s in; runner.execute renders the report itself."""
    reports = tmp_path_factory.mktemp("reports")
    result = execute(
        builtin_topology("pair"),
        agent_factory(group="pair", count=40, rate=10),
        Schedule(seed=1, steps=[Step(at=3, fault="kill", target="master:pair")], settle_s=4),
        label="report-kill",
        reports=reports,
        show_progress=False,
    )
    assert result.summary is not None
    return result.run_dir


def test_every_reconciled_run_gets_a_report(killed_run: Path) -> None:
    html = (killed_run / "report.html").read_text()
    md = (killed_run / "summary.md").read_text()
    assert 'id="verdict"' in html and 'id="timeline"' in html and 'id="latency"' in html
    assert "kill pair-1" in html, "the kill window is labelled on the timeline"
    assert "<rect" in html.split('id="latency"')[1].split("</svg>")[0], "latency bars from the summary"
    assert "brokers/pair-1/broker.log" in html, "links to the broker logs"
    assert "| lost | duplicated |" in md
    assert 'id="promises"' in html and "at_least_once" in html, "the promise table is at the top"


def test_report_is_self_contained(killed_run: Path) -> None:
    """Opens offline: nothing is fetched from anywhere (no http(s) src/href, no CSS import)."""
    html = (killed_run / "report.html").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html), "external reference"
    assert "@import" not in html and "url(http" not in html
    # Every link is relative and points to a file of the run.
    for href in re.findall(r'href="([^"]+)"', html):
        if not href.startswith(("data:", "#")):
            assert (killed_run / href).exists(), f"dangling link {href}"


def test_report_renders_quickly(killed_run: Path) -> None:
    t0 = time.monotonic()
    render_report(killed_run)
    assert time.monotonic() - t0 < 10  # generous: a hard ceiling, the figure is in the report to the lead


@needs_chromium
def test_report_loads_in_headless_chromium(killed_run: Path) -> None:
    shot = killed_run / "report.png"
    page = load(killed_run / "report.html", screenshot=shot)
    assert page.console == [], f"console errors: {page.console}"
    assert 'data-rendered="yes"' in page.dom, "the page's script did not run to the end"
    assert re.search(r"Verdict: (PASS|FAIL)", page.dom)
    assert page.dom.count('class="rate"') >= 2, "send and receive rate lines plotted"
    assert 'class="fault"' in page.dom and 'class="conn"' in page.dom
    assert shot.exists() and shot.stat().st_size > 20_000, "a screenshot with content"


@needs_chromium
def test_checker_sees_console_errors(tmp_path: Path) -> None:
    """The check above can fail: a page that throws is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>console.error('boom'); nosuch();</script></body></html>")
    page = load(bad)
    assert len(page.console) == 2, page.console
