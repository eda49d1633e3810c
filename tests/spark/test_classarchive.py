"""The class-data-sharing archive: written once, then mapped by every new Spark JVM."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_analysis.classarchive import LOCAL_ONLY_DROP

# extended: an install step (scripts/setup.sh builds the archive); a build and two JVMs take 40-120 s
pytestmark = [pytest.mark.spark, pytest.mark.extended, pytest.mark.timeout(600)]

# a child that starts a local Spark session and prints the JVM's mapped files
MAPS = (
    "import psutil; from spark_analysis.session import get_spark; s = get_spark(small=True);"
    "jvm = s.sparkContext._gateway.proc.pid;"
    "print('\\n'.join(m.path for m in psutil.Process(jvm).memory_maps()))"
)


def _env(cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LOCAL_ONLY_DROP}
    return {**env, "XDG_CACHE_HOME": str(cache), **extra}


def test_archive_is_built_once_and_mapped_by_new_jvms(tmp_path: Path) -> None:
    env = _env(tmp_path)
    build = [sys.executable, "-m", "spark_analysis.classarchive"]
    out = subprocess.run(build, env=env, capture_output=True, text=True, timeout=400, check=True)
    archives = list((tmp_path / "bfh" / "spark-cds").glob("*.jsa"))
    assert len(archives) == 1, out.stdout + out.stderr
    assert str(archives[0]) in out.stdout
    assert archives[0].stat().st_size > 50 << 20  # Spark's classes, not an empty shell

    built = archives[0].stat().st_mtime
    again = subprocess.run(build, env=env, capture_output=True, text=True, timeout=60, check=True)
    assert str(archives[0]) in again.stdout
    assert archives[0].stat().st_mtime == built  # already there: nothing rebuilt

    maps = subprocess.run([sys.executable, "-c", MAPS], env=env, capture_output=True, text=True, timeout=300)
    assert maps.returncode == 0, maps.stderr[-2000:]
    assert str(archives[0]) in maps.stdout.splitlines()

    off = subprocess.run(
        [sys.executable, "-c", MAPS],
        env=_env(tmp_path, BFH_SPARK_CDS="0"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert off.returncode == 0, off.stderr[-2000:]
    assert str(archives[0]) not in off.stdout.splitlines()
