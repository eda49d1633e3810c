"""The suite a bare `pytest` (or `make test`) runs, and in which order.

- The markers named by the ini option `bfh_default_excludes` (this checkout: `extended`, the
  Docker backend, a Spark cluster and server, the CI templates from a built wheel, the ActiveMQ
  seed reproductions) are left out when pytest runs its default paths; naming a path
  (`pytest tests/docker`) or a `-m` that names the marker runs them. CI runs both (`.ci/run`).
- Longest tests first, so the slow scenarios do not start last and stretch the run's tail on 3-4
  workers. Durations measured in earlier runs (pytest's cache, `bfh/durations`) decide; without
  them (a fresh clone), markers estimate. A module whose tests share a module-scoped fixture (a
  shared pair) stays together, in its own order, weighed as a whole: the fixture is still set up
  once per module and worker."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

CACHE_KEY = "bfh/durations"
_measured: dict[str, float] = defaultdict(float)


def _estimate(item: pytest.Item, known: dict[str, float]) -> float:
    if item.nodeid in known:
        return float(known[item.nodeid])
    marks = {m.name for m in item.iter_markers()}
    if marks & {"verdict_power", "slow"}:
        return 60.0
    if "entry" in getattr(getattr(item, "callspec", None), "params", {}):
        return 30.0  # a catalog scenario
    if marks & {"broker", "spark", "docker"}:
        return 20.0
    return 0.5


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("bfh_default_excludes", "markers a run of the default paths leaves out", type="args")


def _excluded(config: pytest.Config) -> list[str]:
    if config.args_source != pytest.Config.ArgsSource.TESTPATHS:
        return []
    asked = str(config.getoption("markexpr") or "")
    return [m for m in config.getini("bfh_default_excludes") if m not in asked]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    marks = _excluded(config)
    if marks:
        out = [i for i in items if any(i.get_closest_marker(m) for m in marks)]
        if out:
            config.hook.pytest_deselected(items=out)
            items[:] = [i for i in items if i not in out]
    cache: Any = getattr(config, "cache", None)  # absent under -p no:cacheprovider
    known: dict[str, float] = cache.get(CACHE_KEY, {}) if cache is not None else {}
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    # a module sharing a fixture between its tests stays one block; other tests sort one by one
    blocks = [b for its in modules.values() for b in ([its] if _shares_fixture(its) else [[i] for i in its])]
    weight = [sum(_estimate(i, known) for i in b) for b in blocks]
    order = sorted(range(len(blocks)), key=lambda k: -weight[k])  # stable: ties keep collection order
    items[:] = [i for k in order for i in blocks[k]]


def _shares_fixture(items: list[pytest.Item]) -> bool:
    """Whether the tests use a module-, class- or package-scoped fixture (set up once per worker
    that runs them, so they are kept together)."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        for defs in getattr(info, "name2fixturedefs", {}).values():
            if any(d.scope in ("module", "class", "package") for d in defs):
                return True
    return False


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _measured[report.nodeid] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    cache: Any = getattr(session.config, "cache", None)
    if cache is None or hasattr(session.config, "workerinput") or not _measured:
        return  # the controller sees every report and writes once
    known = dict(cache.get(CACHE_KEY, {}))
    known.update({k: round(v, 2) for k, v in _measured.items()})
    cache.set(CACHE_KEY, known)
