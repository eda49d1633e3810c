"""harness/pytest_plugin/options.py and workers.py through real pytest runs of a small project: the
options' ini twins (the command line wins), the deprecated spellings a conftest forwards, and the
worker count xdist's `-n auto` asks the plugin for (BFH_WORKERS) on a scenario run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .pluginproject import run_pytest, write_project

PROJECT = {
    "pytest.ini": "[pytest]\nbfh_reports = from-ini\nbfh_gate = agent\nbfh_rounds = 2\n",
    "conftest.py": (
        "from harness.pytest_plugin.options import add_deprecated_alias, warn_deprecated\n\n"
        "def pytest_addoption(parser):\n    add_deprecated_alias(parser, '--reports', '--bfh-reports')\n\n"
        "def pytest_configure(config):\n    warn_deprecated(config)\n"
    ),
    # prints what the plugin's fixtures resolved
    "scenarios/test_show.py": (
        "def test_show(reports_root, bfh_gate, bfh_rounds, backend_kind):\n"
        "    print('SHOW', reports_root.name, bfh_gate, bfh_rounds, backend_kind)\n"
    ),
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path, PROJECT)


def _run(project: Path, *args: str, **env_extra: str) -> subprocess.CompletedProcess[str]:
    return run_pytest(project, "-p", "no:cacheprovider", *args, **env_extra)


def _shown(p: subprocess.CompletedProcess[str]) -> list[str]:
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    line = next(ln for ln in p.stdout.splitlines() if "SHOW " in ln)
    return line.split("SHOW ", 1)[1].split()


def test_ini_twins_and_the_command_line_wins(project: Path) -> None:
    assert _shown(_run(project, "-n", "0", "-s")) == ["from-ini", "agent", "2", "local"]
    given = _run(project, "-n", "0", "-s", "--bfh-reports", "given", "--bfh-gate", "all")
    assert _shown(given) == ["given", "all", "2", "local"]


def test_a_bad_ini_value_is_a_usage_error(project: Path) -> None:
    (project / "pytest.ini").write_text("[pytest]\nbfh_gate = some\n")
    p = _run(project, "-n", "0")
    assert p.returncode == 4 and "bfh_gate" in p.stderr, p.stdout[-2000:] + p.stderr[-2000:]


def test_a_deprecated_spelling_sets_the_bfh_option_and_warns(project: Path) -> None:
    p = _run(project, "-n", "0", "-s", "--reports", "old-spelling")
    assert _shown(p)[0] == "old-spelling"
    assert "--reports is deprecated: use --bfh-reports" in p.stdout, p.stdout[-3000:]


@pytest.mark.parametrize(
    ("args", "workers", "expected"),
    [
        # 1, not this 2-core machine's CPU count (xdist's own answer to `-n auto`)
        pytest.param((), "1", "1 worker", id="default-BFH_WORKERS"),
        pytest.param(("-n", "auto"), "1", "1 worker", id="auto-agrees"),
        pytest.param(("-n", "2"), "1", "2 workers", id="n-decides"),
        pytest.param((), "0", None, id="BFH_WORKERS-0-one-process"),
        pytest.param(("-p", "no:xdist"), "2", None, id="no-xdist"),
    ],
)
def test_scenario_run_workers(
    project: Path, args: tuple[str, ...], workers: str, expected: str | None
) -> None:
    p = _run(project, "scenarios", *args, BFH_WORKERS=workers)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    if expected is None:
        assert "created:" not in p.stdout and "1 passed" in p.stdout, p.stdout[-2000:]
    else:
        assert f"{expected} [1 item]" in p.stdout, p.stdout[-2000:]


MINE = """name: mine
groups:
  - name: solo
    kind: pair
    connectors: [mqtt, openwire]
"""


def test_bfh_topology_marker_takes_a_file_or_a_name(project: Path) -> None:
    (project / "scenarios" / "mine.yaml").write_text(MINE)
    (project / "scenarios" / "test_marked.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.bfh_topology('mine.yaml')\n"
        "def test_file(bfh_topology):\n    print('TOPOLOGY', bfh_topology.name)\n\n"
        "@pytest.mark.bfh_topology('network-of-pairs')\n"
        "def test_name(bfh_topology):\n    print('TOPOLOGY', bfh_topology.name)\n"
    )
    p = _run(project, "-n", "0", "-s", "scenarios/test_marked.py")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    names = [ln.split("TOPOLOGY ", 1)[1].strip() for ln in p.stdout.splitlines() if "TOPOLOGY " in ln]
    assert names == ["mine", "network-of-pairs"], p.stdout[-2000:]
