"""The plugin's fixtures: the session's options (`reports_root`, `backend_kind`, `agent_cmd`,
`bfh_agent_protocol`, `bfh_gate`, `bfh_fleet`, `bfh_rounds`, `bfh_unknown`), `scenario_record`,
and for a team's own failover tests `bfh_topology`, `bfh_env`, `bfh_faults`, `bfh_judge`; the
Spark warm-up."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.pytest_plugin.options import settings


@pytest.fixture(scope="session")
def reports_root(request: pytest.FixtureRequest) -> Path:
    return Path(settings(request.config).reports).resolve()


@pytest.fixture(scope="session")
def backend_kind(request: pytest.FixtureRequest) -> str:
    return settings(request.config).backend


@pytest.fixture(scope="session")
def agent_cmd(request: pytest.FixtureRequest) -> str | None:
    """--bfh-agent-cmd or --bfh-agent-cmd-only: the agent under test (None: the reference agent)."""
    return settings(request.config).agent


@pytest.fixture(scope="session")
def bfh_agent_protocol(request: pytest.FixtureRequest) -> str | None:
    """--bfh-agent-protocol: the one protocol agent_cmd speaks (None: each scenario's own).
    Only with an agent command: the reference agent speaks every protocol."""
    s = settings(request.config)
    return s.agent_protocol if s.agent else None


@pytest.fixture(scope="session")
def bfh_gate(request: pytest.FixtureRequest) -> str:
    """--bfh-gate: the gate policy of the catalog's runs (all or agent)."""
    return settings(request.config).gate


@pytest.fixture(scope="session")
def bfh_fleet(request: pytest.FixtureRequest) -> int | None:
    """--bfh-fleet: agents per group of the fleet entries (None: each entry's own size)."""
    return settings(request.config).fleet


@pytest.fixture(scope="session")
def bfh_rounds(request: pytest.FixtureRequest) -> int:
    """--bfh-rounds: how many times each catalog scenario runs (harness.run.rounds)."""
    return settings(request.config).rounds


@pytest.fixture(scope="session")
def bfh_unknown(request: pytest.FixtureRequest) -> tuple[str, int]:
    """--bfh-unknown and --bfh-rerun-unknown: (fail | skip, re-runs) for an unknown verdict."""
    s = settings(request.config)
    return s.unknown, s.rerun_unknown


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
    """The topology bfh_env brings up: `@pytest.mark.bfh_topology("name-or-file")` (a built-in
    name, or a topology file: relative to the test's folder if it is there, else to the current
    one), else the built-in pair."""
    from harness.catalog.scenarios import VARIANTS, topology_named
    from harness.topology import load_topology

    marker = request.node.get_closest_marker("bfh_topology")
    name = str(marker.args[0]) if marker else "pair"
    if name in VARIANTS:
        return topology_named(name)
    beside = request.path.parent / name
    return load_topology(beside if beside.is_file() else name)


@pytest.fixture
def bfh_env(
    request: pytest.FixtureRequest,
    bfh_topology: Any,
    reports_root: Path,
    backend_kind: str,
    agent_cmd: str | None,
    bfh_agent_protocol: str | None,
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
        agent_protocol=bfh_agent_protocol,
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
