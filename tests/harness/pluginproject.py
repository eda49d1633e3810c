"""A small pytest project on disk and a real pytest run in it with the harness plugin: what the
plugin's own tests (options, suite ordering) drive instead of calling the plugin's hooks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def write_project(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        f = root / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return root


def run_pytest(project: Path, *args: str, **env_extra: str) -> subprocess.CompletedProcess[str]:
    """pytest with the plugin in `project`; this run's own worker and BFH_WORKERS are not inherited."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "BFH_WORKERS"))}
    env.update(PYTHONPATH=str(ROOT), **env_extra)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "harness.pytest_plugin.plugin", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
