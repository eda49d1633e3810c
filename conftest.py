"""Pytest integration: options, environment fixtures, scenario results in JUnit and a summary table."""

from __future__ import annotations

import contextlib
import io
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.env import Environment, new_run_dir
from harness.topology import builtin_topology

_RESULTS: list[dict[str, Any]] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("bfh", "broker-failover harness")
    g.addoption("--backend", default="local", help="broker backend: local (default) or docker")
    g.addoption(
        "--agent-cmd",
        default=None,
        help="agent command template with {config} {workload} {log} (default: the reference agent)",
    )
    g.addoption("--reports", default="reports", help="folder for run folders (default: reports/)")


@pytest.fixture(scope="session")
def reports_root(request: pytest.FixtureRequest) -> Path:
    return Path(request.config.getoption("--reports")).resolve()


@pytest.fixture(scope="session")
def backend_kind(request: pytest.FixtureRequest) -> str:
    return str(request.config.getoption("--backend"))


@pytest.fixture(scope="session")
def agent_cmd(request: pytest.FixtureRequest) -> str | None:
    return request.config.getoption("--agent-cmd")


@pytest.fixture(scope="session", autouse=True)
def _spark_warmup(request: pytest.FixtureRequest) -> None:
    """Get Spark ready in the background while the first scenario runs: a cold session costs tens
    of seconds that the first reconcile would otherwise wait out."""
    if any(item.get_closest_marker("spark") for item in request.session.items):
        target = _connect_spark if _share_spark() else _warm_spark
        threading.Thread(target=target, name="spark-warmup", daemon=True).start()


def _share_spark() -> bool:
    """On xdist workers, use one Spark Connect server owned by the controller (spark_analysis.server)
    instead of a JVM per worker: one cold start instead of three, and less memory beside the brokers.
    BFH_SPARK_SHARED=0, BFH_SPARK_MASTER or BFH_SPARK_REMOTE keep the worker's own choice."""
    import os

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
    import tempfile

    from spark_analysis.reconcile import reconcile
    from spark_analysis.synth import tiny_history

    with tempfile.TemporaryDirectory(prefix="bfh-warmup-") as tmp:
        run_dir = tiny_history(Path(tmp) / "warmup")
        with contextlib.suppress(Exception):  # the first real reconcile reports a broken Spark
            reconcile([run_dir])


def pytest_unconfigure(config: pytest.Config) -> None:
    import os

    if not os.environ.get("PYTEST_XDIST_WORKER"):  # the controller owns the shared server
        from spark_analysis.server import stop

        stop(os.getpid())


@pytest.fixture
def pair_env(reports_root: Path, backend_kind: str, request: pytest.FixtureRequest) -> Iterator[Environment]:
    """A started master/slave pair behind the fault proxy, in its own run folder."""
    run_id, run_dir = new_run_dir(reports_root, request.node.name[:40].replace("[", "-").replace("]", ""))
    with Environment.up(builtin_topology("pair"), run_dir, run_id, backend=backend_kind) as env:
        yield env


@pytest.fixture
def run_scenario(reports_root: Path, backend_kind: str, agent_cmd: str | None, scenario_record: Any) -> Any:
    """Run one scenario end to end (real brokers, fault proxy, agent, Spark) and record its counts."""
    from scenarios.support import scenario_runner

    return scenario_runner(reports_root, backend_kind, agent_cmd, scenario_record)


@pytest.fixture
def scenario_record(record_property: Any) -> Any:
    """Call with a run's summary: counts go to JUnit properties and the session table."""

    def record(summary: dict[str, Any], run_dir: Path) -> None:
        d = summary.get("deliveries", {})
        row = {
            "verdict": summary.get("verdict"),
            "run_dir": str(run_dir),
            **{k: d.get(k, 0) for k in ("expected", "ok", "lost", "duplicated")},
            "unexpected": summary.get("unexpected", 0),
        }
        for k, v in row.items():
            record_property(k, v)

    return record


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Properties travel with the report, so this also works under pytest-xdist's controller.
    if report.when == "call":
        props = dict(report.user_properties)
        if "verdict" in props:
            _RESULTS.append({"test": report.nodeid, **props})


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _RESULTS:
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title="scenario runs")
    for col in ("test", "verdict", "expected", "ok", "lost", "duplicated", "unexpected", "run_dir"):
        t.add_column(col)
    for r in _RESULTS:
        t.add_row(
            *(
                str(r.get(c, ""))
                for c in ("test", "verdict", "expected", "ok", "lost", "duplicated", "unexpected", "run_dir")
            )
        )
    console = Console(file=io.StringIO(), width=220, force_terminal=False)
    console.print(t)
    terminalreporter.write(console.file.getvalue())  # type: ignore[attr-defined]
    index = _session_index(Path(terminalreporter.config.getoption("--reports")).resolve())
    if index is not None:
        terminalreporter.write_line(f"scenario reports: {index}")


def _session_index(root: Path) -> Path | None:
    """reports/session-<time>.html linking every scenario's report.html (harness.reporting)."""
    import json
    import time

    from harness.reporting import headline, render_index

    entries = []
    for r in _RESULTS:
        summary_path = Path(str(r.get("run_dir"))) / "analysis" / "summary.json"
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
        entries.append({"name": r["test"], "run_dir": r.get("run_dir"), **headline(summary)})
    try:
        out = root / f"session-{time.strftime('%Y%m%d-%H%M%S')}.html"
        return render_index(entries, out, "pytest session")
    except OSError:
        return None
