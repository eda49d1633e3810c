"""A scorecard (harness/contracts/scorecard.py, `bfh-scorecard/1`) from judged run folders.

Reads each run's run.json and analysis/verdict.json only (no re-judge, no Spark: milliseconds a
run), so every writer (the pytest plugin, `bfh run`, `bfh validate`) and `bfh compare` on a folder
build the same rounds the same way:

    round_from_run(run_dir) -> Round      one run: verdict, promise statuses, measures, load
    entry_of(run_dir) -> str             its entry id: the catalog entry (`name` or
                                         `name@topology` off the pair), or `validate:<row>`
    run_folders(path) -> [Path]          a run folder, or the run folders under a folder
    scorecard_from_runs(paths, ...)      a whole Scorecard, rounds grouped by entry

A run never judged (no verdict.json) is a round with verdict `error` and no measures.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import harness
from harness.contracts import manifest, runrecord
from harness.contracts.scorecard import Agent, Load, Round, Scorecard, ScorecardError
from harness.verdict.judge import VERDICT_FILE, read_verdict


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def load_of(observed: Any) -> Load:
    """The round's load from run.json observations.load (loadlog.summarize's shape)."""
    o = observed if isinstance(observed, dict) else {}
    probe: dict[str, Any] = o["probe"] if isinstance(o.get("probe"), dict) else {}
    brokers: dict[str, Any] = o["brokers"] if isinstance(o.get("brokers"), dict) else {}
    overloaded = o.get("overloaded_samples")
    return Load(
        load_avg_max=_num(o.get("load1_max")),
        sched_delay_max_s=_num(probe.get("max_s")),
        sched_delay_p99_s=_num(probe.get("p99_s")),
        overloaded_samples=overloaded if isinstance(overloaded, int) else None,
        broker_answer_max_s=_num(brokers.get("max_s")),
    )


def _measures(checks: Any) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for c in checks if isinstance(checks, list) else []:
        for name, values in ((c.get("measures") or {}) if isinstance(c, dict) else {}).items():
            if isinstance(values, list):
                out[str(name)] = [float(x) for x in values if _num(x) is not None]
    return out


def round_from_run(run_dir: Path) -> Round:
    """One round from a judged run folder (verdict `error` when it was never judged)."""
    run_dir = Path(run_dir)
    run = runrecord.read_or_none(run_dir) or {}
    judged = _own_verdict(run_dir, runrecord.run_id_of(run))
    checks = judged.get("checks")
    seed = run.get("seed")
    return Round(
        run_id=runrecord.run_id_of(run) or str(judged.get("run") or run_dir.name),
        seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
        verdict=str(judged.get("verdict") or "error"),
        promises={
            str(c["promise"]): str(c.get("status"))
            for c in (checks if isinstance(checks, list) else [])
            if isinstance(c, dict) and "promise" in c
        },
        measures=_measures(checks),
        load=load_of((run.get("observations") or {}).get("load")),
    )


def _own_verdict(run_dir: Path, run_id: str | None) -> dict[str, Any]:
    """analysis/verdict.json when it is a regular file judging this run ({} when there is none);
    ScorecardError for one in a FIFO's or folder's place, or another run's."""
    path = run_dir / VERDICT_FILE
    try:
        manifest.check_kind(path, "the judge's verdict.json")
    except manifest.EvidenceError as e:
        raise ScorecardError(str(e)) from None
    judged = read_verdict(run_dir)
    other = judged.get("run")
    if run_id and other is not None and other != run_id:
        raise ScorecardError(f"{path}: another run's verdict (run {other!r}; this folder's is {run_id!r})")
    return judged


def entry_of(run_dir: Path) -> str:
    """The entry id a run folder belongs to (as the plugin's items name it: test_scenario[ID])."""
    run = runrecord.read_or_none(Path(run_dir)) or {}
    name = str((run.get("scenario") or {}).get("name") or Path(run_dir).name)
    topology = (run.get("topology") or {}).get("name")
    if name.startswith("validate:") or not topology or topology == "pair":
        return name
    return f"{name}@{topology}"


def _commands(run_dirs: Iterable[Path]) -> list[str]:
    seen: list[str] = []
    for d in run_dirs:
        for a in (runrecord.read_or_none(d) or {}).get("agents") or []:
            cmd = a.get("command") if isinstance(a, dict) else None
            if isinstance(cmd, str) and cmd not in seen:
                seen.append(cmd)
    return seen


def agent_of(run_dirs: Iterable[Path], version: str = "") -> Agent:
    """The agent's identity: its command line(s) as run.json holds them, and their sha256."""
    command = "\n".join(_commands(run_dirs))
    digest = hashlib.sha256(command.encode()).hexdigest()
    return Agent(version=version, command=command, command_sha256=digest)


def run_folders(path: Path) -> list[Path]:
    """`path` itself when it is a run folder (has run.json), else every run folder under it,
    oldest run.json first; ScorecardError when there is none."""
    path = Path(path)
    if (path / runrecord.RUN_JSON).is_file():
        return [path]
    if not path.is_dir():
        raise ScorecardError(f"{path}: neither a scorecard, a run folder nor a folder of run folders")
    found = [p.parent for p in path.rglob(runrecord.RUN_JSON)]
    if not found:
        raise ScorecardError(f"{path}: no run folder (run.json) under it")
    return sorted(found, key=lambda d: (os.stat(d / runrecord.RUN_JSON).st_mtime, str(d)))


def scorecard_from_runs(
    paths: Path | str | Iterable[Path | str],
    source: str = "run folders",
    agent_version: str = "",
) -> Scorecard:
    """A scorecard of run folders: each path a run folder or a folder of run folders; rounds
    grouped by `entry_of`, in the order of `run_folders`. `source` is one of contracts.scorecard
    SOURCES (`bfh compare` on folders: "run folders")."""
    items = [paths] if isinstance(paths, str | Path) else list(paths)
    dirs = [d for p in items for d in run_folders(Path(p))]
    card = Scorecard.model_validate(
        {"source": source, "harness_version": harness.__version__, "agent": agent_of(dirs, agent_version)}
    )
    for d in dirs:
        card.add_round(entry_of(d), round_from_run(d))
    return card
