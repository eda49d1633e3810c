"""The suite a bare `pytest` (or `make test`) runs, and in which order.

- The markers named by the ini option `bfh_default_excludes` (this checkout: `extended`, the
  Docker backend, a Spark cluster and server, the CI templates from a built wheel, the ActiveMQ
  seed reproductions) are left out when pytest runs its default paths; naming a path
  (`pytest tests/docker`) or a `-m` that names the marker runs them. CI runs both (`.ci/run`).
- Longest tests first, so the slow scenarios do not start last and stretch the run's tail on 3-4
  workers; under xdist's worksteal, each worker's initial share starts with its part of the long
  tests (`_deal`). Durations measured in earlier runs (pytest's cache, `bfh/durations`) decide; without
  them (a fresh clone), markers estimate. A module whose tests share a module-scoped fixture (a
  shared pair) stays together, in its own order, weighed as a whole: the fixture is still set up
  once per module and worker."""

from __future__ import annotations

from typing import Any

import pytest

CACHE_KEY = "bfh/durations"


def _estimate(item: pytest.Item, known: dict[str, float]) -> float:
    if item.nodeid in known:
        return float(known[item.nodeid])
    # without a measurement: the mean of each kind in this checkout's own runs (2026-11-25)
    marks = {m.name for m in item.iter_markers()}
    if marks & {"verdict_power", "slow"}:
        return 40.0
    if "entry" in getattr(getattr(item, "callspec", None), "params", {}):
        return 28.0  # a catalog scenario
    if marks & {"broker", "docker"}:
        return 7.0
    if "spark" in marks:
        return 6.0
    return 0.3


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
    blocks, weight = [blocks[k] for k in order], [weight[k] for k in order]
    given: dict[str, Any] = getattr(config, "workerinput", {})  # an xdist worker's, from the controller
    shares = _deal(blocks, weight, int(given["workercount"])) if given.get(DIST_KEY) == "worksteal" else None
    items[:] = [i for share in (shares or blocks) for i in share]


#: the controller's --dist, passed to each worker (a worker's own option reads "no")
DIST_KEY = "bfh_dist"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    node.workerinput[DIST_KEY] = node.config.getoption("dist", None)


#: a test (or block) estimated shorter than this fills the workers' shares after the long ones
LIGHT_S = 1.0


def _deal(blocks: list[list[pytest.Item]], weight: list[float], n: int) -> list[list[pytest.Item]] | None:
    """xdist's worksteal first hands worker k the k-th contiguous share of the items (sizes
    len // n, ...), then idle workers steal from the tails of the others' queues. Sorted longest
    first as one list, the long tests would all start on one worker. So each share is built long
    first: the long blocks dealt greedily to the least loaded share, then the short tests fill
    every share to its exact size. None when the long blocks alone overflow a share."""
    if n < 2:
        return None
    rem, sizes = sum(len(b) for b in blocks), []
    for k in range(n):
        sizes.append(rem // (n - k))
        rem -= sizes[-1]
    shares: list[list[pytest.Item]] = [[] for _ in range(n)]
    load = [0.0] * n
    for b, w in zip(blocks, weight, strict=True):
        if w >= LIGHT_S:
            fits = [k for k in range(n) if len(shares[k]) + len(b) <= sizes[k]]
            if not fits:
                return None
            k = min(fits, key=lambda k: load[k])
            shares[k] += b
            load[k] += w
    light = iter([i for b, w in zip(blocks, weight, strict=True) if w < LIGHT_S for i in b])
    for k in range(n):
        shares[k] += [next(light) for _ in range(sizes[k] - len(shares[k]))]
    return shares


def _shares_fixture(items: list[pytest.Item]) -> bool:
    """Whether the tests use a module-, class- or package-scoped fixture (set up once per worker
    that runs them, so they are kept together)."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        for defs in getattr(info, "name2fixturedefs", {}).values():
            if any(d.scope in ("module", "class", "package") for d in defs):
                return True
    return False


class Durations:
    """This session's measured durations (a plugin object in config.stash, not a module global:
    pytest_runtest_logreport gets no config)."""

    def __init__(self) -> None:
        self.measured: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.measured[report.nodeid] = self.measured.get(report.nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        cache: Any = getattr(session.config, "cache", None)
        if cache is None or hasattr(session.config, "workerinput") or not self.measured:
            return  # the controller sees every report and writes once
        known = dict(cache.get(CACHE_KEY, {}))
        known.update({k: round(v, 2) for k, v in self.measured.items()})
        cache.set(CACHE_KEY, known)


DURATIONS = pytest.StashKey[Durations]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[DURATIONS] = Durations()
    config.pluginmanager.register(config.stash[DURATIONS], "bfh-durations")
