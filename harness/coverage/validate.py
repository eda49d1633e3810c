"""`bfh validate`: every fault row of a topology run with traffic on every path, in parallel where the
machine allows, within an optional budget; reconciled and judged by the one run tail
(`harness.run.runner.finish`), and the result a coverage matrix (harness/coverage/matrix.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from harness import procs
from harness.coverage import workload
from harness.coverage.rows import FAULTS, Row, rows_for
from harness.faults.schedule import Schedule
from harness.run.runner import CATALOG_POLICY as POLICY
from harness.run.runner import RunError, execute, finish
from harness.topology import Topology
from harness.topology.paths import PathPrediction, predict_traffic
from harness.verdict.checks.paths import path_cells
from harness.verdict.view import RunView

console = Console(stderr=True, emoji=False)  # "kill:a:" is no emoji code
NETWORK_WARMUP_S = 4.0
FIRST_ESTIMATE_S = 90.0  # a row's wall time until one has been measured


@dataclass(frozen=True)
class RunOptions:
    """How every row runs (the CLI's and the plugin's options): the agent, where, which gate."""

    seed: int = 1
    agent_cmd: str | None = None
    reports: Path = Path("reports")
    backend: str = "local"
    gate: str | None = None
    fleet: int | None = None  # N agents per group (harness/agents/fleet.py)
    agent_protocol: str | None = None  # the one protocol agent_cmd speaks (pytest --bfh-agent-protocol)


@dataclass
class RowResult:
    row: Row
    run_dir: Path | None = None
    verdict: str = "not_run"  # pass | fail | unknown | not_run | error
    broken: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    cells: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    wall_s: float = 0.0


@dataclass
class Coverage:
    topology: Topology
    predictions: list[PathPrediction]
    results: list[RowResult]
    wall_s: float = 0.0
    budget_s: float | None = None
    parallel: int = 1


def default_parallel(topology: Topology) -> int:
    """Concurrent runs: three rows of up to six brokers (a hub and two spokes ran 25 rows in 7 min
    on 2 cores with 1.2 of them busy), fewer as the topology grows."""
    brokers = sum(g.size for g in topology.groups)
    return max(1, min(3, 18 // max(brokers, 1)))


def plan_rows(topology: Topology, faults: list[str] | None, groups: list[str] | None) -> list[Row]:
    """The rows to run, checked before anything starts (unknown names are an error)."""
    bad = sorted(set(faults or []) - set(FAULTS))
    if bad:
        raise workload.CoverageError(f"unknown fault(s) {', '.join(bad)}; known: {', '.join(FAULTS)}")
    names = {g.name for g in topology.groups}
    bad = sorted(set(groups or []) - names)
    if bad:
        raise workload.CoverageError(
            f"unknown group(s) {', '.join(bad)}; topology has {', '.join(sorted(names))}"
        )
    workload.protocol_of(topology)
    return rows_for(topology, set(faults or []) or None, set(groups or []) or None)


def _run_row(topology: Topology, row: Row, paths: list[dict[str, Any]], opts: RunOptions) -> Path:
    fleet = opts.fleet
    factory = workload.agents(
        topology, paths, row.count, row.rate, row.timeout_s, opts.agent_cmd, fleet, opts.agent_protocol
    )
    from harness.verdict import DEFAULT_GATES

    params: dict[str, Any] = {**row.params, "paths": paths}
    if fleet and fleet > 1:
        params.update(fleet=fleet, subscribe_wait_s=180, connect_bound_s=60.0)
    if opts.gate and opts.gate != "all":
        params["gate"] = opts.gate
    record = {"name": f"validate:{row.key}", "what": row.what, "gates": list(DEFAULT_GATES), "params": params}
    result = execute(
        topology,
        factory,
        Schedule(seed=opts.seed, steps=list(row.steps), settle_s=15.0 if topology.bridges else 8.0),
        label=f"cover-{row.key.replace(':', '-').replace('>', '')}",
        reports=Path(opts.reports),
        backend=opts.backend,
        reconcile=False,
        show_progress=False,
        warmup_s=NETWORK_WARMUP_S if topology.bridges else 0.0,
        scenario=record,
        wait_traffic=True,  # every row's faults land mid-traffic
        subscribe_wait_s=float(params.get("subscribe_wait_s", 60)),
    )
    return result.run_dir


def run_coverage(
    topology: Topology,
    rows: list[Row],
    opts: RunOptions | None = None,
    *,
    budget_s: float | None = None,
    parallel: int | None = None,
) -> Coverage:
    """Run `rows` (baseline first), at most `parallel` at once; a row is not started when the
    budget would end before it (the rows left are reported as not run)."""
    t0 = time.monotonic()
    preds = predict_traffic(topology)
    paths = workload.measured(topology, preds)
    par = parallel or default_parallel(topology)
    opts = opts or RunOptions()
    results = {r.key: RowResult(r) for r in rows}
    from spark_analysis import warmup

    warming = warmup.start(small=True)
    walls: list[float] = []
    lock = threading.Lock()

    def one(row: Row) -> None:
        start = time.monotonic()
        try:
            results[row.key].run_dir = _run_row(topology, row, paths, opts)
        except (RunError, OSError, ValueError) as e:
            results[row.key].verdict, results[row.key].error = "error", f"{type(e).__name__}: {e}"
        took = time.monotonic() - start
        with lock:
            walls.append(took)
        results[row.key].wall_s = round(took, 1)
        console.log(f"row {row.key}: ran in {took:.0f}s")

    pending = list(rows)
    running: set[Future[None]] = set()
    with (
        ThreadPoolExecutor(max_workers=par, thread_name_prefix="cover") as pool,
        _stop_all_on_interrupt(pool),
    ):
        while pending or running:
            while pending and len(running) < par:
                estimate = max(walls) if walls else FIRST_ESTIMATE_S
                first = len(pending) == len(rows)  # the baseline always runs: it proves the paths
                if budget_s is not None and not first and time.monotonic() - t0 + estimate > budget_s:
                    console.log(f"[yellow]budget: {len(pending)} row(s) not started[/]")
                    pending = []
                    break
                row = pending.pop(0)
                console.log(f"row {row.key} ({len(rows) - len(pending)}/{len(rows)}): {row.what}")
                running.add(pool.submit(one, row))
            if running:
                done, running = wait(running, return_when=FIRST_COMPLETED)
                for f in done:
                    f.result()
    ran = [r for r in results.values() if r.run_dir is not None]
    warming.join(timeout=300)
    _judge(ran)
    return Coverage(topology, preds, [results[r.key] for r in rows], time.monotonic() - t0, budget_s, par)


@contextmanager
def _stop_all_on_interrupt(pool: ThreadPoolExecutor) -> Iterator[None]:
    """Ctrl-C: start no more rows and kill every child (brokers, proxy, agents), so the rows that
    run end now instead of after their traffic; their environments still tear down."""
    try:
        yield
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        procs.kill_all()
        raise


def run_row(topology: Topology, row: Row, opts: RunOptions | None = None) -> RowResult:
    """One row on its own, run, reconciled and judged (the pytest plugin's `--bfh-topology` items)."""
    paths = workload.measured(topology, predict_traffic(topology))
    start = time.monotonic()
    out = RowResult(row, _run_row(topology, row, paths, opts or RunOptions()))
    out.wall_s = round(time.monotonic() - start, 1)
    _judge([out])
    return out


def _judge(ran: list[RowResult]) -> None:
    """Reconcile every run in one Spark job, judge each, and count its paths."""
    if not ran:
        return
    verdicts = finish([r.run_dir for r in ran if r.run_dir is not None], policy=POLICY)
    for r, v in zip(ran, verdicts, strict=True):
        r.verdict = v.verdict
        r.broken = list(v.broken)
        r.reasons = [ln.strip() for ln in v.message().splitlines()[1:-1]] if v.verdict == "fail" else []
        view = RunView.load(v.run_dir)
        paths = view.params.get("paths") or []
        r.cells = path_cells(view.summary, paths)
        _blame(r.cells, paths, view)


def _blame(cells: list[dict[str, Any]], paths: list[dict[str, Any]], view: RunView) -> None:
    """Each cell's anomalies by whose fault they are (the verdict's blame, per flow: the
    publisher from the msg_id's send records)."""
    from harness.verdict.blame import read

    sender = {
        str(r.get("msg_id")): agent
        for agent, recs in view.records.items()
        for r in recs
        if r.get("event") == "send_attempt"
    }
    counts: dict[tuple[Any, Any, Any], dict[str, int]] = {}
    for b in read(view.run_dir, ["msg_id", "subscriber", "subscription", "status", "blame"]):
        key = (sender.get(str(b["msg_id"])), b["subscriber"], b["subscription"])
        name = f"{b['status']}:{b['blame']}"
        counts.setdefault(key, {})[name] = counts.get(key, {}).get(name, 0) + 1
    for c, p in zip(cells, paths, strict=True):
        c["blame"] = counts.get((p.get("publisher"), p.get("subscriber"), p.get("subscription")), {})
