"""The package installs from its wheel into a fresh virtualenv and works outside this checkout.

The venv is tests/install/venv.py's (the `installed` fixture of conftest.py). `bfh doctor` and
`bfh topology list` then run from the temp dir, and the templates and topologies must come from
the installed package.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.install.venv import REPO
from tests.install.venv import clean_env as _env
from tests.install.venv import ok as _ok
from tests.install.venv import run as _run

pytestmark = [pytest.mark.timeout(300)]  # about 10 s


def test_installed_package_resolves_its_own_data(installed: Path) -> None:
    py, here = installed / "bin" / "python", installed.parent
    probe = (
        "import harness, json; from importlib import resources; "
        "print(json.dumps({'harness': harness.__file__, "
        "'templates': str(resources.files('harness') / 'templates'), "
        "'topologies': str(resources.files('harness') / 'topologies')}))"
    )
    where = json.loads(_ok(_run([str(py), "-c", probe], here, _env()), "import harness"))
    for k, v in where.items():
        assert Path(v).resolve().is_relative_to(installed.resolve()), f"{k} from {v}, not the installed one"
        assert not Path(v).resolve().is_relative_to(REPO), f"{k} from the checkout: {v}"

    # the broker config renders from the installed templates (what every scenario starts with)
    render = (
        "import sys; from pathlib import Path; from harness.topology import builtin_topology; "
        "from harness.deploy.plan import make_plan; from harness.deploy.brokerconf import render_broker; "
        "plan = make_plan(builtin_topology('pair'), Path(sys.argv[1])); "
        "files = render_broker(plan, plan.brokers['pair-1']); "
        "print(sorted(files)); assert 'openwire' in files['activemq.xml']"
    )
    _ok(_run([str(py), "-c", render, str(here / "run")], here, _env()), "render activemq.xml")

    listed = _run([str(installed / "bin" / "bfh"), "topology", "list"], here, _env())
    topologies = _ok(listed, "bfh topology list")
    for name in ("pair", "secure-pair", "network-of-pairs"):
        assert name in topologies.split(), f"{name} not listed by the installed bfh:\n{topologies}"


def test_installed_doctor(installed: Path) -> None:
    bfh, here = installed / "bin" / "bfh", installed.parent
    p = _run([str(bfh), "doctor", "--json"], here, _env())
    assert p.returncode in (0, 2), f"bfh doctor: {p.returncode}\n{p.stderr}"
    report = json.loads(p.stdout)
    data = next(c for c in report["checks"] if c["what"] == "package data")
    assert data["ok"] and str(installed) in data["detail"], data
    assert (p.returncode == 0) == report["ok"]
    table = _run([str(bfh), "doctor"], here, _env())
    assert "bfh doctor" in table.stdout and "package data" in table.stdout, table.stdout
