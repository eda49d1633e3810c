"""harness/suite.py through real pytest runs of a small project: the default paths leave the
`bfh_default_excludes` markers out, a named path or `-m` brings them back, and tests run
longest first by the durations an earlier run left in pytest's cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = {
    "pyproject.toml": """
[tool.pytest.ini_options]
testpaths = ["t"]
markers = ["extended: long"]
bfh_default_excludes = ["extended"]
""",
    "t/test_a_quick.py": "def test_quick():\n    pass\n",
    "t/test_b_long.py": "import time\n\ndef test_long():\n    time.sleep(0.3)\n",
    "t/test_c_ext.py": "import pytest\n\n@pytest.mark.extended\ndef test_ext():\n    pass\n",
    "t/test_d_mixed.py": (
        "import time\n\ndef test_short():\n    pass\n\ndef test_slow():\n    time.sleep(0.2)\n"
    ),
    # a module-scoped fixture: its tests stay together, in their own order, weighed as a whole
    "t/test_e_shared.py": (
        "import time\n\nimport pytest\n\n@pytest.fixture(scope='module')\ndef shared():\n    return 1\n\n"
        "def test_x(shared):\n    pass\n\ndef test_y(shared):\n    time.sleep(0.1)\n"
    ),
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for rel, text in PROJECT.items():
        f = tmp_path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return tmp_path


def _pytest(project: Path, *args: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not this run's worker
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "harness.pytest_plugin", "-p", "no:xdist", "-v", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return [ln.split(" ")[0] for ln in out.stdout.splitlines() if " PASSED" in ln]


def test_default_paths_leave_the_extended_tier_out(project: Path) -> None:
    ran = _pytest(project)
    assert not any("test_c_ext" in r for r in ran), ran
    assert len(ran) == 6
    assert sorted(_pytest(project, "-p", "no:cacheprovider")) == sorted(ran)  # no cache, same suite


def test_a_named_path_or_marker_runs_it(project: Path) -> None:
    assert _pytest(project, "t/test_c_ext.py") == ["t/test_c_ext.py::test_ext"]
    assert _pytest(project, "-m", "extended") == ["t/test_c_ext.py::test_ext"]


def test_measured_durations_put_the_longest_first(project: Path) -> None:
    first = _pytest(project)
    # no durations yet: markers estimate (0.5 s a test here), so the two-test block leads, then
    # collection order
    assert first[:3] == [
        "t/test_e_shared.py::test_x",
        "t/test_e_shared.py::test_y",
        "t/test_a_quick.py::test_quick",
    ], first
    second = _pytest(project)
    # the cache's durations: b (0.3 s), d's slow test (0.2 s, ahead of its module's short one),
    # then e's two tests together (0.1 s as a whole, its own order)
    assert second[:4] == [
        "t/test_b_long.py::test_long",
        "t/test_d_mixed.py::test_slow",
        "t/test_e_shared.py::test_x",
        "t/test_e_shared.py::test_y",
    ], second
