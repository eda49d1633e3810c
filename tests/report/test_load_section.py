"""The report's "Machine load" section (harness/report/loadsummary.py): the run's load summary,
as run.json keeps it, shown beside the faults; nothing for a folder from before the probe."""

from __future__ import annotations

from harness.report.loadsummary import load_section

LOAD = {
    "file": "load.jsonl",
    "samples": 57,
    "probe": {"max_s": 0.1976, "p99_s": 0.12},
    "proxy": {"max_s": 0.05, "p99_s": 0.02},
    "brokers": {"max_s": 0.3, "p99_s": 0.1, "no_answer": 4},
    "load1_max": 24.17,
    "cpus": 2,
    "load1_per_core_max": 12.09,
    "overloaded_samples": 0,
    "starved_samples": 57,
    "worst": [{"ts": 1.0, "at": "17:24:40 UTC", "delay_s": 0.3, "source": "broker pair-2"}],
}


def test_the_load_summary_is_shown_with_its_run_queue():
    html = str(load_section({"observations": {"load": LOAD}}))
    assert "Machine load" in html and "24.17 on 2 cores (12.09)" in html
    assert "0.198 s / 0.120 s" in html and "(4)" in html and "0.3 s at 17:24:40 UTC (broker pair-2)" in html
    assert ">57<" in html  # the starved samples


def test_a_folder_without_a_load_summary_shows_none():
    assert load_section({}) is None
    assert load_section({"observations": {"load": None}}) is None
    old = {k: v for k, v in LOAD.items() if k not in ("cpus", "load1_per_core_max", "starved_samples")}
    assert "on ? cores (–)" in str(load_section({"observations": {"load": old}}))
