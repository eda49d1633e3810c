"""The index page (pytest session / validate run) links each run's report by a relative path."""

from __future__ import annotations

from pathlib import Path

from harness.report.html import render_index


def test_index_links_reports_relatively(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "report.html").write_text("<html></html>")
    rows = [
        {
            "name": "kill <master>",
            "run_dir": str(run),
            "verdict": "fail",
            "lost": 3,
            "duplicated": 0,
            "dropped": 0,
            "recovery_s": 1.5,
        },
        {
            "name": "not run",
            "run_dir": str(tmp_path / "missing"),
            "verdict": "error",
            "lost": 0,
            "duplicated": 0,
            "dropped": 0,
            "recovery_s": None,
        },
    ]
    out = render_index(rows, tmp_path / "index" / "session.html", "session")
    html = out.read_text()
    assert 'href="../runs/r1/report.html"' in html
    assert "kill &lt;master&gt;" in html, "names are escaped"
    assert html.count("<a href") == 1, "no link to a report that does not exist"
