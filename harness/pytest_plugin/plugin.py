"""The pytest plugin (entry point `pytest11`, name `harness.pytest_plugin.plugin`): the conformance
catalog, fixtures for a team's own failover tests, JUnit properties and the HTML session report.

In any repository that installed the package:

    pytest --bfh-agent-cmd "my-agent --config {config} --workload {workload} --log {log}" -k masterslave

adds the catalog (harness/pytest_plugin/conformance/test_catalog.py, one item per catalog entry,
marked with its tags) to the session; `--bfh-scenarios a,b` restricts it to named entries,
`--bfh-catalog` adds it with the reference agent. `--agent-cmd` names the agent without adding the
catalog (this
checkout's scenarios/test_catalog.py collects it itself). Fixtures: `bfh_env` (a topology up,
its `urls`, agents, `judge()`), `bfh_faults` (kill, pause, partition), `bfh_judge` (reconcile and
judge a run folder), and `reports_root`, `backend_kind`, `agent_cmd`, `scenario_record`.
The entry point and this checkout's conftest.py (`pytest_plugins`) use the same plugin name, so
pytest registers it once whichever loads it first.
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# which items a default run includes, and longest modules first
pytest_plugins = ["harness.pytest_plugin.suite"]
# added to the session as a folder, so its items are `test_catalog.py::test_scenario[NAME]`
CATALOG_DIR = Path(__file__).with_name("conformance")
_RESULTS: list[dict[str, Any]] = []
_MARKERS = {
    "broker": "tests that start real ActiveMQ brokers",
    "spark": "tests that start a Spark session",
    "bfh_topology": "bfh_topology(name): the topology bfh_env brings up (default: pair)",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("bfh", "broker-failover harness")
    g.addoption(
        "--bfh-agent-cmd",
        dest="bfh_agent_cmd",
        default=None,
        help="gate this agent: command template with {config} {workload} {log}; adds the conformance "
        "catalog (select with -k or --bfh-scenarios)",
    )
    g.addoption(
        "--agent-cmd",
        dest="agent_cmd",
        default=None,
        help="the agent command for every scenario and fixture, without adding the catalog "
        "(default: the reference agent)",
    )
    g.addoption(
        "--bfh-scenarios",
        dest="bfh_scenarios",
        default=None,
        help="comma-separated catalog entries to run (`bfh run --list`); adds the catalog",
    )
    g.addoption(
        "--bfh-catalog",
        dest="bfh_catalog",
        action="store_true",
        help="add the conformance catalog to the session",
    )
    g.addoption(
        "--bfh-backend",
        "--backend",
        dest="bfh_backend",
        default="local",
        choices=("local", "docker"),
        help="broker backend: local (default) or docker",
    )
    g.addoption(
        "--bfh-reports",
        "--reports",
        dest="bfh_reports",
        default="reports",
        help="folder for run folders and the session report (default: reports/)",
    )
    g.addoption(
        "--bfh-gate",
        "--gate",
        dest="bfh_gate",
        default="all",
        choices=("all", "agent"),
        help="anomalies that fail a scenario: all (default) or agent (only those blamed on the agent; "
        "broker findings are listed as warnings); saved in run.json",
    )
    g.addoption(
        "--bfh-topology",
        dest="bfh_topology",
        default=None,
        help="validate this topology (file or built-in name): one test per fault row of its coverage "
        "matrix, traffic on every delivery path (bfh validate's rows)",
    )
    g.addoption(
        "--bfh-faults",
        dest="bfh_faults",
        default=None,
        help="with --bfh-topology: comma-separated fault rows only (baseline, kill, pause, ...)",
    )
    g.addoption(
        "--bfh-fleet",
        dest="bfh_fleet",
        type=_fleet_size,
        default=None,
        help="agents per group of the fleet entries (-k fleet): the agent command runs as N processes, "
        "Stratos-shaped (docs/fleet.md); with --bfh-topology, N subscribers per group",
    )
    g.addoption(
        "--bfh-rounds",
        dest="bfh_rounds",
        type=int,
        default=1,
        help="run each catalog scenario N times (another seed each round); report failures of N and "
        "the 95 %% upper bound on the failure probability (JUnit properties, reports/rounds-*.json)",
    )
    g.addoption(
        "--bfh-agent-protocol",
        "--agent-protocol",
        dest="bfh_agent_protocol",
        default=None,
        choices=("mqtt", "stomp", "openwire"),
        help="protocol of the agent command: its workload and mb.urls use this connector "
        "(default: each scenario's own, MQTT unless it says otherwise)",
    )


def _fleet_unasked(config: pytest.Config, entry: Any) -> bool:
    """Fleet entries run only when asked (`-k fleet`, `-m fleet`, --bfh-fleet, --bfh-scenarios):
    `-k masterslave` also matches `fleet-masterslave`, and the gate must not grow."""
    asked = f"{config.getoption('keyword') or ''} {config.getoption('markexpr') or ''}"
    return "fleet" in entry.tags and "fleet" not in asked and not config.getoption("bfh_fleet")


def _fleet_size(text: str) -> int:
    n = int(text)
    if n < 1:
        raise ValueError(text)
    return n


def _agent_cmd(config: pytest.Config) -> str | None:
    both = {config.getoption("bfh_agent_cmd"), config.getoption("agent_cmd")} - {None}
    if len(both) > 1:
        raise pytest.UsageError("--bfh-agent-cmd and --agent-cmd name different agents; give one")
    return next(iter(both), None)


def _wanted(config: pytest.Config) -> list[str]:
    raw = config.getoption("bfh_scenarios") or ""
    return [n.strip() for n in raw.split(",") if n.strip()]


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    _default_workers(config)


def _default_workers(config: pytest.Config) -> None:
    """`pytest scenarios/ -k masterslave`, typed as users type it, runs the scenarios on
    BFH_WORKERS (3) xdist workers: a scenario mostly waits on brokers and traffic, so three share
    two cores. `-n N` (`-n 0`: one process) or `-p no:xdist` decides otherwise."""
    if os.environ.get("PYTEST_XDIST_WORKER") or not config.pluginmanager.hasplugin("xdist"):
        return
    if config.option.numprocesses is not None or config.option.collectonly or config.option.usepdb:
        return
    paths = [str(a).split("::")[0].rstrip("/") for a in config.args]
    scenario_run = any(p == "scenarios" or p.endswith("/scenarios") or "scenarios/" in p for p in paths)
    asked = (
        config.getoption("bfh_agent_cmd")
        or config.getoption("bfh_catalog")
        or config.getoption("bfh_topology")
    )
    if not (scenario_run or asked):
        return
    n = int(os.environ.get("BFH_WORKERS", "3"))
    if n > 0:
        config.option.numprocesses = n
        config.option.dist = "worksteal" if config.option.dist == "no" else config.option.dist
        config.option.tx = ["popen"] * n


def pytest_configure(config: pytest.Config) -> None:
    from harness.catalog import scenarios as catalog

    catalog.GATE = str(config.getoption("bfh_gate"))
    catalog.FLEET = config.getoption("bfh_fleet")
    tags = sorted({t for sc in catalog.SCENARIOS.values() for t in sc.tags})
    for name, doc in {**{t: f"catalog entries tagged {t}" for t in tags}, **_MARKERS}.items():
        config.addinivalue_line("markers", f"{name}: {doc}")
    _agent_cmd(config)
    unknown = [n for n in _wanted(config) if n not in catalog.SCENARIOS]
    if unknown:
        raise pytest.UsageError(f"--bfh-scenarios: unknown {unknown}; known: {', '.join(catalog.SCENARIOS)}")
    matrix = bool(config.getoption("bfh_topology"))
    if matrix:
        _check_topology(config)
    # --bfh-topology alone runs only the matrix: the catalog comes too when asked for by name
    agent = config.getoption("bfh_agent_cmd") and not matrix
    catalog_too = bool(agent or _wanted(config) or config.getoption("bfh_catalog"))
    config.stash[_MODULES] = {"test_topology.py": matrix, "test_catalog.py": catalog_too}
    if (matrix or catalog_too) and str(CATALOG_DIR) not in config.args:
        config.args.append(str(CATALOG_DIR))


_MODULES = pytest.StashKey[dict[str, bool]]()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Of the plugin's own test modules, collect only those the options asked for."""
    if collection_path.parent != CATALOG_DIR or collection_path.suffix != ".py":
        return None
    return not config.stash.get(_MODULES, {}).get(collection_path.name, False)


def _check_topology(config: pytest.Config) -> None:
    """A bad --bfh-topology or --bfh-faults is a usage error before anything starts."""
    from harness.coverage import CoverageError, plan_rows
    from harness.topology import TopologyError, load_topology

    faults = config.getoption("bfh_faults")
    try:
        plan_rows(
            load_topology(config.getoption("bfh_topology")), faults.split(",") if faults else None, None
        )
    except (TopologyError, CoverageError) as e:
        raise pytest.UsageError(f"--bfh-topology: {' '.join(str(e).split())}") from None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Drop catalog items collected twice (the plugin's module and a file importing its test, like
    this checkout's scenarios/test_catalog.py), then keep only the --bfh-scenarios entries."""
    seen: set[str] = set()
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    wanted = set(_wanted(config))
    for item in items:
        fn = getattr(item, "function", None)
        where = (getattr(fn, "__module__", ""), getattr(fn, "__name__", ""))
        if where != ("harness.pytest_plugin.conformance.test_catalog", "test_scenario"):
            keep.append(item)
            continue
        entry = item.callspec.params["entry"]  # type: ignore[attr-defined]
        key = item.callspec.id  # type: ignore[attr-defined]
        if (
            key in seen
            or (wanted and entry.name not in wanted)
            or (not wanted and _fleet_unasked(config, entry))
        ):
            dropped.append(item)
            continue
        seen.add(key)
        keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


# -- fixtures ------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def reports_root(request: pytest.FixtureRequest) -> Path:
    return Path(request.config.getoption("bfh_reports")).resolve()


@pytest.fixture(scope="session")
def backend_kind(request: pytest.FixtureRequest) -> str:
    return str(request.config.getoption("bfh_backend"))


@pytest.fixture(scope="session")
def agent_cmd(request: pytest.FixtureRequest) -> str | None:
    cmd = _agent_cmd(request.config)
    protocol = request.config.getoption("bfh_agent_protocol")
    if cmd and protocol:  # every agent_factory given this command builds `protocol` workloads
        from harness.agents.launch import COMMAND_PROTOCOLS

        COMMAND_PROTOCOLS[cmd] = protocol
    return cmd


@pytest.fixture(scope="session")
def bfh_rounds(request: pytest.FixtureRequest) -> int:
    """--bfh-rounds: how many times each catalog scenario runs (harness.run.rounds)."""
    n = int(request.config.getoption("bfh_rounds"))
    if n < 1:
        raise pytest.UsageError(f"--bfh-rounds must be at least 1, not {n}")
    return n


@pytest.fixture
def scenario_record(record_property: Any) -> Any:
    """Call with a RunResult: its verdict, broken promises and counts go to JUnit properties and
    the session table."""

    def record(result: Any) -> None:
        summary = result.summary or {}
        d = summary.get("deliveries", {})
        row = {
            "verdict": summary.get("verdict", "error"),
            "broken": ",".join(summary.get("broken", [])) or "-",
            "run_dir": str(result.run_dir),
            **{k: d.get(k, 0) for k in ("expected", "ok", "lost", "duplicated")},
            "unexpected": summary.get("unexpected", 0),
        }
        for k, v in row.items():
            record_property(k, v)
        for k, v in result.phases_s.items():  # where the wall time went
            record_property(f"time_{k}_s", v)
        record_property("time", " ".join(f"{v:.0f}" for v in result.phases_s.values()))

    return record


@pytest.fixture
def bfh_topology(request: pytest.FixtureRequest) -> Any:
    """The topology bfh_env brings up: `@pytest.mark.bfh_topology("name")`, else the built-in pair
    (override this fixture for one of your own: harness.topology.load_topology)."""
    from harness.catalog.scenarios import topology_named

    marker = request.node.get_closest_marker("bfh_topology")
    return topology_named(marker.args[0] if marker else "pair")


@pytest.fixture
def bfh_env(
    request: pytest.FixtureRequest,
    bfh_topology: Any,
    reports_root: Path,
    backend_kind: str,
    agent_cmd: str | None,
    scenario_record: Any,
) -> Iterator[Any]:
    """The topology up behind the fault proxy (harness.run.handrun.HandRun): `urls` (mb.urls),
    `start_agent(...)`, `faults`, `judge()`; everything is stopped when the test ends."""
    from harness.run.handrun import HandRun

    label = request.node.name[:40].replace("[", "-").replace("]", "")
    with HandRun(
        bfh_topology,
        reports_root,
        backend=backend_kind,
        label=label,
        agent_cmd=agent_cmd,
        on_result=scenario_record,
    ) as run:
        yield run


@pytest.fixture
def bfh_faults(bfh_env: Any) -> Any:
    """Kill, pause, partition a member or a link of bfh_env (harness.run.handrun.FaultHandle)."""
    return bfh_env.faults


@pytest.fixture
def bfh_judge() -> Any:
    """`bfh_judge(run_dir)`: reconcile the folder (Spark) and return its harness.verdict Verdict."""
    from harness.run.handrun import judge_run

    return judge_run


# -- Spark warm-up -------------------------------------------------------------------------------
_SPARK_FIXTURES = {"bfh_env", "bfh_judge"}


@pytest.fixture(scope="session", autouse=True)
def _spark_warmup(request: pytest.FixtureRequest) -> None:
    """Get Spark ready in the background while the first scenario runs: a cold session costs tens
    of seconds that the first reconcile would otherwise wait out."""
    if any(
        item.get_closest_marker("spark") or _SPARK_FIXTURES & set(getattr(item, "fixturenames", ()))
        for item in request.session.items
    ):
        from spark_analysis.warmup import import_here

        import_here()  # not on the thread: the first test may read a module it is importing
        target = _connect_spark if _share_spark() else _warm_spark
        threading.Thread(target=target, name="spark-warmup", daemon=True).start()


def _share_spark() -> bool:
    """On xdist workers, use one Spark Connect server owned by the controller
    (spark_analysis.shared_server) instead of a JVM per worker: one cold start instead of three, and
    less memory beside the brokers.
    BFH_SPARK_SHARED=0, BFH_SPARK_MASTER or BFH_SPARK_REMOTE keep the worker's own choice."""
    if not os.environ.get("PYTEST_XDIST_WORKER") or os.environ.get("BFH_SPARK_SHARED") == "0":
        return False
    if os.environ.get("BFH_SPARK_MASTER") or os.environ.get("BFH_SPARK_REMOTE"):
        return False
    os.environ["BFH_SPARK_CONNECT_OWNER"] = str(os.getppid())  # the xdist controller
    return True


def _connect_spark() -> None:
    """Start (or join) the shared server; it warms itself up before it takes clients."""
    from spark_analysis.session import get_spark

    with contextlib.suppress(Exception):  # the first real reconcile reports a broken Spark
        get_spark()


def _warm_spark() -> None:
    """Reconcile a tiny run: loads the classes and compiles the plans every real reconcile uses."""
    from spark_analysis.warmup import warm_up

    warm_up()


def pytest_unconfigure(config: pytest.Config) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # the controller owns the shared server
        from spark_analysis.shared_server import stop

        stop(os.getpid())


# -- session table and report --------------------------------------------------------------------
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Properties travel with the report, so this also works under pytest-xdist's controller.
    if report.when == "call":
        props = dict(report.user_properties)
        if "verdict" in props:
            _RESULTS.append({"test": report.nodeid.split("::")[-1], **props})


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _RESULTS or os.environ.get("PYTEST_XDIST_WORKER"):  # the controller writes the one index
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    t = Table(
        title="scenario runs",
        caption="time (s): brokers_up subscribe traffic faults_heal settle agents_stop teardown "
        "reconcile judge report",
    )
    cols: tuple[str, ...] = (
        "test",
        "verdict",
        "broken",
        "expected",
        "ok",
        "lost",
        "duplicated",
        "unexpected",
        "time",
        "run_dir",
    )
    if any("rounds" in r for r in _RESULTS):  # --bfh-rounds: failures of N, 95 % bound
        cols = (*cols[:3], "rounds", "failures", "failure_p_upper95", *cols[3:])
        _write_rounds(Path(terminalreporter.config.getoption("bfh_reports")).resolve())
    for col in cols:
        t.add_column(col)
    for r in _RESULTS:  # escaped: "test_scenario[masterslave]" is not rich markup
        t.add_row(*(escape(str(r.get(c, ""))) for c in cols))
    console = Console(file=io.StringIO(), width=220, force_terminal=False)
    console.print(t)
    terminalreporter.write(console.file.getvalue())  # type: ignore[attr-defined]
    index = _session_index(Path(terminalreporter.config.getoption("bfh_reports")).resolve())
    if index is not None:
        terminalreporter.write_line(f"scenario reports: {index}")


def _write_rounds(root: Path) -> None:
    """reports/rounds-<time>.json: per scenario, the rounds, failures and the 95 % bound."""
    import json
    import time

    keys = ("rounds", "failures", "failure_p_upper95", "first_failing_run", "replay", "run_dir")
    rows = [{"test": r["test"], **{k: r[k] for k in keys if k in r}} for r in _RESULTS if "rounds" in r]
    with contextlib.suppress(OSError):
        root.mkdir(parents=True, exist_ok=True)
        (root / f"rounds-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(rows, indent=2) + "\n")


def _session_index(root: Path) -> Path | None:
    """reports/session-<time>.html linking every scenario's report.html (harness.report.html)."""
    import json
    import time

    from harness.report.html import headline, render_index

    entries = []
    for r in _RESULTS:
        summary_path = Path(str(r.get("run_dir"))) / "analysis" / "summary.json"
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
        entries.append(
            {
                "name": r["test"],
                "run_dir": r.get("run_dir"),
                "broken": summary.get("broken"),
                **headline(summary),
            }
        )
    try:
        out = root / f"session-{time.strftime('%Y%m%d-%H%M%S')}.html"
        return render_index(entries, out, "pytest session")
    except OSError:
        return None
