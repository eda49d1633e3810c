"""The plugin keeps to its own namespace (issue 31): in a fresh venv holding only the wheel, from a
folder outside this checkout, `pytest --help` shows the plugin's options all `--bfh-*` (each with
its ini twin), none of the old unprefixed spellings; and the catalog's baseline entry runs and
passes with `--bfh-agent-cmd` naming the reference agent."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.install.venv import REPO, ok, run, venv_env

OLD_SPELLINGS = ("--agent-cmd", "--backend", "--reports", "--gate", "--agent-protocol")
REFERENCE = "{python} -m agent_under_test.reference --config {config} --workload {workload} --log {log}"


def _outside(tmp_path: Path) -> Path:
    here = tmp_path / "elsewhere"
    here.mkdir()
    assert REPO not in here.resolve().parents
    return here


def _group(help_text: str, title: str) -> list[str]:
    """The option names of one `--help` group (its lines up to the next blank line)."""
    lines = help_text.split(f"\n{title}:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return [m.group(1) for ln in lines if (m := re.match(r"\s{2}(-[-\w]+)", ln))]


@pytest.mark.timeout(300)
def test_help_shows_only_bfh_options(installed: Path, tmp_path: Path) -> None:
    py = str(installed / "bin" / "python")
    text = ok(run([py, "-m", "pytest", "--help"], _outside(tmp_path), venv_env(installed)), "pytest --help")
    options = _group(text, "broker-failover harness")
    assert "--bfh-agent-cmd" in options and "--bfh-scenarios" in options, options
    assert all(o.startswith("--bfh-") for o in options), options
    for old in OLD_SPELLINGS:  # not in the plugin's group, nor anywhere else (xdist, pytest: none)
        assert not re.search(rf"(^|[\s,]){re.escape(old)}[=\s,]", text, re.M), f"{old} in --help:\n{text}"
    ini = text.split("[pytest] ini-options", 1)[1]
    for o in options:  # every option has its ini twin
        assert re.search(rf"^\s+{o[2:].replace('-', '_')} ", ini, re.M), f"no ini twin of {o}"


@pytest.mark.extended  # a wheel, a fresh venv and one catalog run (about 2 min)
@pytest.mark.broker
@pytest.mark.spark
@pytest.mark.timeout(900)
def test_baseline_passes_from_outside(installed: Path, tmp_path: Path) -> None:
    here = _outside(tmp_path)
    py = str(installed / "bin" / "python")
    argv = [py, "-m", "pytest", "--bfh-agent-cmd", REFERENCE, "--bfh-scenarios", "baseline"]
    p = run(argv, here, venv_env(installed), timeout=840)
    tail = f"\n{p.stdout[-5000:]}\n{p.stderr[-2000:]}"
    assert p.returncode == 0, f"exit {p.returncode}{tail}"
    assert re.search(r"\b1 passed\b", p.stdout) and "test_scenario[baseline]" in p.stdout, tail
    assert list((here / "reports").glob("session-*.html")), f"no session report in {here}/reports{tail}"
