"""harness/pytest_plugin/suite.py through real pytest runs of a small project: the default paths leave the
`bfh_default_excludes` markers out, a named path or `-m` brings them back, and tests run
longest first by the durations an earlier run left in pytest's cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .pluginproject import run_pytest, write_project

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
    return write_project(tmp_path, PROJECT)


def _run(project: Path, *args: str, **env_extra: str) -> str:
    """A real pytest run in `project` with the plugin; its stdout (it must pass)."""
    out = run_pytest(project, *args, **env_extra)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


def _pytest(project: Path, *args: str) -> list[str]:
    stdout = _run(project, "-p", "no:xdist", "-v", *args)
    return [ln.split(" ")[0] for ln in stdout.splitlines() if " PASSED" in ln]


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
    # no durations yet: markers estimate (0.3 s a test here), so the two-test block leads, then
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


def test_worksteal_shares_start_with_their_part_of_the_long_tests() -> None:
    from harness.pytest_plugin.suite import _deal

    # blocks sorted longest first, as pytest_collection_modifyitems hands them over
    weights = [100.0, 60.0, 40.0, 30.0, 30.0, 20.0] + [0.3] * 15
    blocks: list[list[Any]] = [[f"long{k}"] for k in range(6)] + [[f"short{k}"] for k in range(15)]
    blocks[2] = ["block-a", "block-b"]  # a module sharing a fixture: one block, kept together
    shares = _deal(blocks, weights, 4)
    assert shares is not None
    # worksteal's first split of 22 items over 4 workers: 5, 5, 6, 6 (each share exactly that)
    assert [len(s) for s in shares] == [5, 5, 6, 6]
    assert [s[0] for s in shares] == ["long0", "long1", "block-a", "long3"]
    assert shares[2][:2] == ["block-a", "block-b"]
    assert sorted(i for s in shares for i in s) == sorted(i for b in blocks for i in b)
    long_load = [sum(w for b, w in zip(blocks, weights, strict=True) if b[0] in s and w >= 1) for s in shares]
    assert long_load == [100.0, 60.0, 60.0, 60.0]  # greedy: 100 | 60 | 40+20 | 30+30
    assert _deal([["a", "b", "c"], ["d"]], [50.0, 0.3], 2) is None  # the long block overflows a share
    assert _deal(blocks, weights, 1) is None


def test_each_xdist_worker_starts_on_a_long_test(tmp_path: Path) -> None:
    """Through real xdist workers (worksteal): the marked-slow tests are spread, one first on each."""
    (tmp_path / "t").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\ntestpaths = ["t"]\nmarkers = ["slow: long"]\n'
    )
    (tmp_path / "t" / "conftest.py").write_text(
        "import os\n\ndef pytest_runtest_logstart(nodeid, location):\n"
        "    with open(os.environ['STARTS'], 'a') as f:\n"
        "        f.write(os.environ.get('PYTEST_XDIST_WORKER', '-') + ' ' + nodeid + '\\n')\n"
    )
    quick = "".join(f"def test_quick{k}():\n    pass\n\n" for k in range(8))
    slow = "import pytest\n\n" + "".join(
        f"@pytest.mark.slow\ndef test_slow{k}():\n    pass\n\n" for k in range(2)
    )
    (tmp_path / "t" / "test_a_quick.py").write_text(quick)
    (tmp_path / "t" / "test_b_slow.py").write_text(slow)
    starts = tmp_path / "starts.txt"
    _run(tmp_path, "-n", "2", "--dist", "worksteal", STARTS=str(starts))
    first: dict[str, str] = {}
    for line in starts.read_text().splitlines():
        worker, nodeid = line.split(" ", 1)
        if worker != "-":  # the controller's own logstart
            first.setdefault(worker, nodeid)
    assert sorted(first) == ["gw0", "gw1"], first
    assert all("test_slow" in n for n in first.values()), first
