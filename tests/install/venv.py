"""A fresh virtualenv in a temp dir with the package installed from its wheel (tests/install).

The wheel is built from a copy of the sources (so a stale build/ of the checkout cannot leak in),
installed with --no-deps into a new venv; the new venv reuses the project's installed dependencies
through a .pth line (a path only: .venv's own .pth files, among them the editable install of this
checkout, are not processed there).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "harness", "agent_under_test", "spark_analysis")


def run(
    argv: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def ok(p: subprocess.CompletedProcess[str], what: str) -> str:
    assert p.returncode == 0, f"{what} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p.stdout


def clean_env() -> dict[str, str]:
    """This process's environment without what would point a child at the checkout's venv."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def venv_env(venv: Path, **extra: str) -> dict[str, str]:
    """The environment of a command in the installed venv, as a team's shell would have it.
    Not this session's pytest/xdist state: the team's pytest is a session of its own."""
    env = {k: v for k, v in clean_env().items() if not k.startswith(("PYTEST_", "BFH_SPARK_CONNECT"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def build_installed(tmp: Path) -> Path:
    """Build the wheel from a copy of the sources and install it into tmp/venv; returns the venv."""
    assert REPO not in tmp.parents, "the temp dir must be outside the checkout"
    src = tmp / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        p = REPO / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=ignore)
        else:
            shutil.copy2(p, src / name)
    dist = tmp / "dist"
    # no build isolation: the pinned setuptools of requirements.lock builds it, without the network
    ok(
        run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
            + ["-w", str(dist), "."],
            src,
        ),
        "pip wheel",
    )
    wheels = list(dist.glob("broker_failover_harness-*.whl"))
    assert len(wheels) == 1, f"one wheel expected in {dist}: {wheels}"

    venv = tmp / "venv"
    ok(run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp), "python -m venv")
    py = venv / "bin" / "python"
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(ok(run([str(py), "-c", purelib], tmp), "purelib").strip())
    (site / "bfh-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    ok(
        run(
            [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", str(wheels[0])],
            tmp,
        ),
        "pip install the wheel",
    )
    return venv
