"""The pytest plugin and the CI templates, in an agent team's repository that only pip-installed
the package.

A temp directory outside the checkout gets the files of tests/install/agent_repo/ (the team's
agent, `my_agent.py`, and its own test on the plugin's fixtures); the venv is the wheel's
(tests/install/venv.py). The commands of ci-templates/*.yml run there, the install lines replaced
by that venv: GitHub's gate with the reference agent must pass, GitLab's with a defect agent
(resend_acked) must fail, each on the catalog's kill-master entry and the fixture-based test.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.install.venv import REPO, ok, run
from tests.install.venv import venv_env as _venv_env

TEMPLATES = REPO / "ci-templates"
AGENT_REPO = Path(__file__).with_name("agent_repo")
AGENT = "{python} my_agent.py %s--config {config} --workload {workload} --log {log}"
# the kill-master entry and the team's fixture test (the templates' default is every masterslave entry)
SELECT = "test_scenario and masterslave] or follows_the_slave"
INSTALL = re.compile(r"^(DEBIAN_FRONTEND=\S+ )?(apt-get|(python -m )?pip install)\b")


def _team_repo(tmp: Path) -> Path:
    repo = tmp / "team-agent"
    shutil.copytree(AGENT_REPO, repo, ignore=shutil.ignore_patterns("__pycache__"))
    assert REPO not in repo.resolve().parents
    return repo


def _lines(block: str | list[str]) -> list[str]:
    """Shell lines of a `run:` block or a `script:` list (backslash continuations joined)."""
    text = "\n".join(block) if isinstance(block, list) else block
    return [ln.strip() for ln in text.replace("\\\n", " ").splitlines() if ln.strip()]


def _github() -> tuple[dict[str, str], list[str], dict[str, Any]]:
    doc = yaml.safe_load((TEMPLATES / "github-actions.yml").read_text())
    (job,) = doc["jobs"].values()
    lines = [ln for step in job["steps"] if "run" in step for ln in _lines(step["run"])]
    upload = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    return {k: str(v) for k, v in job["env"].items()}, lines, upload


def _gitlab() -> tuple[dict[str, str], list[str], dict[str, Any]]:
    doc = yaml.safe_load((TEMPLATES / "gitlab-ci.yml").read_text())
    (job,) = doc.values()
    lines = _lines(job.get("before_script", [])) + _lines(job["script"])
    return {k: str(v) for k, v in job["variables"].items()}, lines, job["artifacts"]


def _junit_path(lines: list[str]) -> str:
    argv = shlex.split(next(ln for ln in lines if " pytest " in f" {ln} "))
    return argv[argv.index("--junitxml") + 1]


def _run_commands(lines: list[str], cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    """Every line but the install lines, in order, by bash; the pytest line's outcome is returned."""
    out: dict[str, Any] = {}
    for line in lines:
        if INSTALL.match(line):
            continue
        p = subprocess.run(
            ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=1500, check=False
        )
        if " pytest " in f" {line} ":
            out["pytest"] = p
        else:
            assert p.returncode == 0, (
                f"{line!r} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-2000:]}"
            )
    assert "pytest" in out, f"no pytest line in {lines}"
    return out


def _cases(junit: Path) -> dict[str, dict[str, Any]]:
    root = ET.parse(junit).getroot()
    cases = {}
    for tc in root.iter("testcase"):
        props: dict[str, Any] = {str(p.get("name")): p.get("value") for p in tc.iter("property")}
        failed = tc.find("failure") is not None or tc.find("error") is not None
        cases[str(tc.get("name"))] = {"failed": failed, **props}
    return cases


# -- fast: the templates' shape and the plugin's collection ---------------------------------------
def test_templates_install_gate_and_keep_artifacts() -> None:
    for env, lines, artifacts in (_github(), _gitlab()):
        installs = [ln for ln in lines if INSTALL.match(ln)]
        assert any("activemq" in ln and "libmqtt-client-java" in ln for ln in installs), installs
        assert any("pip install" in ln and "$BFH_PACKAGE" in ln for ln in installs), installs
        assert "bfh doctor" in lines
        gate = next(ln for ln in lines if " pytest " in f" {ln} ")
        assert '--bfh-agent-cmd "$AGENT_CMD"' in gate and '-k "$BFH_SELECT"' in gate, gate
        assert env["BFH_SELECT"] == "masterslave" and "{config}" in env["AGENT_CMD"], env
        junit = _junit_path(lines)
        assert junit.startswith("reports/"), junit
        if "when" in artifacts:  # GitLab
            assert artifacts["when"] == "always" and "reports/" in artifacts["paths"], artifacts
            assert artifacts["reports"]["junit"] == junit, artifacts
        else:  # GitHub's upload step
            assert artifacts["if"] == "always()" and artifacts["with"]["path"] == "reports/", artifacts


def test_plugin_collects_the_catalog_once(installed: Path, tmp_path: Path) -> None:
    repo = _team_repo(tmp_path)
    py = str(installed / "bin" / "python")
    p = run(
        [py, "-m", "pytest", "--collect-only", "-q", "--bfh-agent-cmd", AGENT % "", "-k", "masterslave"],
        repo,
        _venv_env(installed),
    )
    listed = ok(p, "pytest --collect-only")
    items = [ln for ln in listed.splitlines() if "::" in ln]
    assert "test_catalog.py::test_scenario[masterslave]" in items, listed
    assert len(items) == len(set(items)) > 1 and all("test_scenario[" in ln for ln in items), items
    # the fixture test is collected too (deselected by -k here), and both agent options agree
    everything = ok(run([py, "-m", "pytest", "--collect-only", "-q"], repo, _venv_env(installed)), "collect")
    assert "tests/test_failover.py::test_my_agent_follows_the_slave" in everything, everything
    bad = run([py, "-m", "pytest", "--bfh-scenarios", "no-such-entry"], repo, _venv_env(installed))
    assert bad.returncode == 4 and "no-such-entry" in bad.stderr, (bad.returncode, bad.stderr)


# -- extended: the gates, green and red ------------------------------------------------------------
@pytest.mark.extended
@pytest.mark.broker
@pytest.mark.timeout(1800)
@pytest.mark.parametrize(
    ("template", "defect"),
    [
        pytest.param("github", None, id="github-reference"),
        pytest.param("gitlab", "resend_acked", id="gitlab-defect"),
    ],
)
def test_template_gate(installed: Path, tmp_path: Path, template: str, defect: str | None) -> None:
    """The template's commands, in the team's repo: the kill-master entry of the catalog and the
    team's fixture test pass with the reference agent and fail with a defect agent."""
    repo = _team_repo(tmp_path)
    variables, lines, _ = _github() if template == "github" else _gitlab()
    agent = AGENT % (f"--defect {defect} " if defect else "")
    env = _venv_env(installed, **{**variables, "AGENT_CMD": agent, "BFH_SELECT": SELECT})
    p = _run_commands(lines, repo, env)["pytest"]
    tail = f"\n{p.stdout[-6000:]}\n{p.stderr[-3000:]}"
    junit = repo / _junit_path(lines)
    assert junit.exists(), f"no JUnit XML at {junit}{tail}"
    cases = _cases(junit)
    assert set(cases) == {"test_scenario[masterslave]", "test_my_agent_follows_the_slave"}, tail
    sessions = list((repo / "reports" / "runs").glob("session-*.html"))
    assert len(sessions) == 1, f"one HTML session report expected: {sessions}{tail}"
    for name, case in cases.items():
        assert Path(case["run_dir"]).is_relative_to(repo / "reports" / "runs"), case
        assert (Path(case["run_dir"]) / "report.html").exists(), f"{name}: no report.html"
    if defect is None:
        assert p.returncode == 0, f"the gate failed with the reference agent{tail}"
        assert all(c["verdict"] == "pass" and not c["failed"] for c in cases.values()), cases
    else:
        assert p.returncode == 1, f"the gate did not fail with {defect}{tail}"
        for name, case in cases.items():
            assert case["failed"] and case["verdict"] == "fail", f"{name}: {case}"
            assert "no_resend_after_ack" in case["broken"], f"{name}: {case}"
