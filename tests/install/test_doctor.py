"""`bfh doctor` on a machine that lacks things: exit 2, each missing item with its Debian package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli.doctor import java_major


@pytest.mark.parametrize(
    ("line", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('openjdk version "1.8.0_392"', 8),
        ('java version "21" 2023-09-19', 21),
        ("garbage", None),
    ],
)
def test_java_major(line: str, major: int | None) -> None:
    assert java_major(line) == major


def _doctor(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # no java, docker, javac or chromium on PATH; an ActiveMQ home without activemq.jar
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "ACTIVEMQ_HOME")}
    env.update(PATH=str(tmp_path), ACTIVEMQ_HOME=str(tmp_path / "amq"))
    code = "import sys; from harness.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, "doctor", *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_missing_core_exits_2_and_says_how_to_install(tmp_path: Path) -> None:
    p = _doctor(tmp_path, "--json")
    assert p.returncode == 2, p.stdout + p.stderr
    checks = {c["what"]: c for c in json.loads(p.stdout)["checks"]}
    java = checks["Java 17+ (brokers, Spark)"]
    assert not java["ok"] and java["required"] and "openjdk-17-jre-headless" in java["detail"]
    amq = checks["ActiveMQ 5.x"]
    assert not amq["ok"] and "apt-get install" in amq["detail"] and "activemq" in amq["detail"]
    docker = checks["Docker daemon"]
    assert not docker["ok"] and not docker["required"] and "docker.io" in docker["detail"]
    table = _doctor(tmp_path)
    assert table.returncode == 2 and "missing" in table.stdout and "docs/install.md" in table.stdout


def test_optional_features_count_only_when_asked(tmp_path: Path) -> None:
    p = _doctor(tmp_path, "--json", "--need", "docker")
    checks = {c["what"]: c for c in json.loads(p.stdout)["checks"]}
    assert checks["Docker daemon"]["required"] and not checks["chromium (report page checks)"]["required"]
    bad = _doctor(tmp_path, "--need", "dockr")
    assert bad.returncode == 2 and "unknown feature 'dockr'" in bad.stderr and not bad.stdout
