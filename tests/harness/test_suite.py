"""harness/suite.py through real pytest runs of a small project: the default paths leave the
`bfh_default_excludes` markers out, a named path or `-m` brings them back, and modules run
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
    assert len(ran) == 2
    assert sorted(_pytest(project, "-p", "no:cacheprovider")) == sorted(ran)  # no cache, same suite


def test_a_named_path_or_marker_runs_it(project: Path) -> None:
    assert _pytest(project, "t/test_c_ext.py") == ["t/test_c_ext.py::test_ext"]
    assert _pytest(project, "-m", "extended") == ["t/test_c_ext.py::test_ext"]


def test_measured_durations_put_the_longest_module_first(project: Path) -> None:
    first = _pytest(project)
    assert first[0].startswith("t/test_a_quick.py"), first  # no durations yet: collection order
    second = _pytest(project)
    assert second[0].startswith("t/test_b_long.py"), second  # the cache says it is the longest
