"""How many xdist workers a scenario run gets: BFH_WORKERS (3) through xdist's own
`pytest_xdist_auto_num_workers` hook, so `-n auto` and the plugin's default agree.

`pytest scenarios/ -k masterslave`, typed as users type it, runs on 3 workers: a scenario mostly
waits on brokers and traffic, so three share two cores. `-n N` (`-n 0`: one process), `-p no:xdist`
or `--pdb` decide otherwise; BFH_WORKERS=0 runs in one process.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

from harness.pytest_plugin.options import settings


def _scenario_run(config: pytest.Config) -> bool:
    """The run names scenarios/ or asks for the catalog or a topology's matrix."""
    paths = [str(a).split("::")[0].rstrip("/") for a in config.args]
    if any(p == "scenarios" or p.endswith("/scenarios") or "scenarios/" in p for p in paths):
        return True
    s = settings(config)
    return bool(s.agent_cmd or s.catalog or s.topology)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> Generator[None, object, object]:
    """xdist asks pytest_xdist_auto_num_workers only for `-n auto`: so a scenario run without -n
    gets `-n auto` here. A wrapper runs before every plain implementation, xdist's tryfirst
    pytest_cmdline_main (which turns "auto" into a count) among them, whichever registered first."""
    if _implicit_auto(config):
        config.option.numprocesses = "auto"
        if config.option.dist == "no":
            config.option.dist = "worksteal"  # long scenarios: idle workers take queued ones
    return (yield)


def _implicit_auto(config: pytest.Config) -> bool:
    if os.environ.get("PYTEST_XDIST_WORKER") or not config.pluginmanager.hasplugin("xdist"):
        return False
    if config.option.numprocesses is not None or config.option.collectonly or config.option.usepdb:
        return False
    return _scenario_run(config)


# tryfirst: xdist's own implementation (the CPU count) registered after this one would answer first
@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """BFH_WORKERS (default 3) for a scenario run; otherwise xdist's own count (the CPUs)."""
    if not _scenario_run(config):
        return None
    return max(0, int(os.environ.get("BFH_WORKERS", "3")))
