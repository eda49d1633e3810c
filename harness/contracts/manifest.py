"""The run manifest (`RUN_DIR/manifest.json`): what a run left as evidence, sealed when it ends.

One owner: this module writes it (`write()`, called by harness/run/runner.py once the run is
reconciled and judged; `reseal_analysis()` after `bfh reconcile` re-reconciles) and checks it
(`verify()`, called by `bfh judge` and `bfh report` before they read anything). It also owns what
"belongs to a run" means for the readers: evidence files are regular files (`check_kind()`: a FIFO
or a directory in a log's place is an error, never a read that blocks), and a record's time lies
inside the run's window (`run_window()`, `ts_ok()`).

Evidence: run.json, faults.jsonl, load.jsonl, broker-usage.jsonl, agents/*/messages.jsonl,
brokers/events.jsonl, brokers/*/broker.log, analysis/summary.json and analysis/messages.parquet,
each with its size, record count (lines) and sha256. The judge writes its own
analysis/verdict.json and leaves summary.json alone; summary.json is still sealed by the digest
of its reconciled part, because folders judged before that change carry the verdict in it
(`JUDGE_KEYS`). The judge's outputs (verdict.json, blame.parquet, report.html, summary.md) are not evidence.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import time
from pathlib import Path
from typing import Any

from harness.contracts import outfile, runrecord
from harness.contracts.runrecord import run_id_of  # run.json's owner; the name stays here too

MANIFEST = "manifest.json"
VERSION = 1
#: summary.json keys the judge wrote into it before it had verdict.json (old folders): not sealed
JUDGE_KEYS = frozenset(
    {
        "verdict",
        "broken",
        "reported",
        "gates",
        "checks",
        "scenario",
        "gate",
        "warnings",
        "blame",
        "contract",
        "note",
    }
)
SUMMARY = "analysis/summary.json"
PARQUET = "analysis/messages.parquet"
#: the evidence globs, relative to the run folder (a directory PARQUET: its files)
EVIDENCE = (
    "run.json",
    "faults.jsonl",
    "load.jsonl",
    "broker-usage.jsonl",
    "agents/*/messages.jsonl",
    "brokers/events.jsonl",
    "brokers/account.jsonl",
    "brokers/account-gaps.json",
    "brokers/*/broker.log",
    SUMMARY,
    PARQUET,
)
#: a record's `ts` is Unix seconds: later than this is not (milliseconds, a typo, a year 2286)
MAX_TS = 1e10
#: how far outside [first agent launched, last agent stopped] a record may lie (same clock)
WINDOW_SLACK_S = 60.0


class EvidenceError(RuntimeError):
    """A run folder's evidence is missing, foreign, altered or unreadable: one line, exit 2."""


# -- file kinds ---------------------------------------------------------------------------------
def check_kind(path: Path, what: str = "") -> bool:
    """True when `path` is a regular file (symlinks followed), False when absent; raises when
    something else is there (a directory, a FIFO, a socket, a device): reading it would fail or
    block."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise EvidenceError(f"{path}: cannot be read ({e.strerror or e})") from None
    if stat.S_ISREG(st.st_mode):
        return True
    kind = (
        "a directory"
        if stat.S_ISDIR(st.st_mode)
        else "a FIFO"
        if stat.S_ISFIFO(st.st_mode)
        else "a socket"
        if stat.S_ISSOCK(st.st_mode)
        else "a device or special file"
    )
    raise EvidenceError(f"{path}: {kind} where {what or 'a regular file'} belongs")


def evidence_files(run_dir: Path, analysis: bool = True) -> list[str]:
    """The run folder's evidence files (relative paths, sorted); raises on a non-regular one."""
    run_dir = Path(run_dir)
    out: set[str] = set()
    for pattern in EVIDENCE:
        if not analysis and pattern.startswith("analysis/"):
            continue
        for p in sorted(run_dir.glob(pattern)):
            rel = p.relative_to(run_dir).as_posix()
            if rel == PARQUET and p.is_dir():  # Spark's output: a folder of part files
                for f in sorted(p.rglob("*")):
                    if f.is_dir() or f.name.startswith((".", "_")):
                        continue
                    check_kind(f)
                    out.add(f.relative_to(run_dir).as_posix())
                continue
            check_kind(p, f"the {pattern} file")
            out.add(rel)
    return sorted(out)


# -- what a file is ---------------------------------------------------------------------------
def _summary_part(data: Any) -> Any:
    return {k: v for k, v in data.items() if k not in JUDGE_KEYS} if isinstance(data, dict) else data


def _digest_file(path: Path) -> tuple[int, int, str]:
    """(size, lines, sha256) in one pass."""
    h, size, lines = hashlib.sha256(), 0, 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
            lines += chunk.count(b"\n")
    return size, lines, h.hexdigest()


def summary_digest(path: Path) -> str:
    """sha256 of summary.json's reconciled part (canonical JSON, the judge's keys left out)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise EvidenceError(f"{path}: unreadable ({e})") from None
    canon = json.dumps(_summary_part(data), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canon.encode()).hexdigest()


def describe(run_dir: Path, rel: str) -> dict[str, Any]:
    path = Path(run_dir) / rel
    if rel == SUMMARY:
        return {"sha256": summary_digest(path), "part": "reconciled"}
    size, lines, sha = _digest_file(path)
    entry: dict[str, Any] = {"size": size, "sha256": sha}
    if rel.endswith(".jsonl") or rel.endswith(".log"):
        entry["records"] = lines
    return entry


def _read_object(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _counts(summary: dict[str, Any] | None) -> dict[str, Any]:
    s = summary or {}
    totals: dict[str, Any] = s["totals"] if isinstance(s.get("totals"), dict) else {}
    deliveries: dict[str, Any] = s["deliveries"] if isinstance(s.get("deliveries"), dict) else {}
    keys = ("attempted", "acknowledged", "dropped", "in_doubt", "receipts", "records")
    out = {k: totals[k] for k in keys if k in totals}
    out.update({k: deliveries[k] for k in ("expected", "ok", "lost", "duplicated") if k in deliveries})
    return out


# -- writing ----------------------------------------------------------------------------------
def atomic_write(path: Path, text: str) -> None:
    """Write to a temporary name in the same folder, then replace: never a half-written file (a
    device or a symlink is written through, never replaced: harness/contracts/outfile.py)."""
    outfile.write_text(path, text)


def build(run_dir: Path, run_id: str | None = None) -> dict[str, Any]:
    run_dir = Path(run_dir).resolve()
    run_id = run_id or run_id_of(runrecord.read_or_none(run_dir)) or run_dir.name
    files = {rel: describe(run_dir, rel) for rel in evidence_files(run_dir)}
    return {
        "version": VERSION,
        "run": run_id,
        "sealed_ts": time.time(),
        "files": files,
        "counts": _counts(_read_object(run_dir / SUMMARY)),
    }


def write(run_dir: Path, run_id: str | None = None) -> Path:
    """Seal the run folder's evidence as it is now (the run has ended): RUN_DIR/manifest.json.
    run.json first says so (`"manifest": "manifest.json"`), so a sealed folder whose manifest
    was removed is not taken for one from before manifests."""
    path = Path(run_dir) / MANIFEST
    run = runrecord.read_or_none(run_dir) if check_kind(runrecord.path_of(run_dir)) else None
    if run is not None and run.get("manifest") != MANIFEST:
        runrecord.update(run_dir, manifest=MANIFEST)
    atomic_write(path, json.dumps(build(run_dir, run_id), indent=1, sort_keys=True) + "\n")
    return path


def reseal_analysis(run_dir: Path) -> bool:
    """After a successful re-reconcile (`bfh reconcile`): the analysis entries and counts renewed,
    the rest kept. False when the folder has no manifest (nothing to renew)."""
    path = Path(run_dir) / MANIFEST
    if not path.exists():
        return False
    old = load(run_dir)
    files = {k: v for k, v in old["files"].items() if not k.startswith("analysis/")}
    files.update(
        {rel: describe(run_dir, rel) for rel in evidence_files(run_dir) if rel.startswith("analysis/")}
    )
    new = {**old, "files": files, "counts": _counts(_read_object(Path(run_dir) / SUMMARY))}
    atomic_write(path, json.dumps(new, indent=1, sort_keys=True) + "\n")
    return True


# -- checking ---------------------------------------------------------------------------------
def load(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / MANIFEST
    check_kind(path, "the manifest")
    data = _read_object(path)
    ok = (
        data is not None
        and data.get("version") == VERSION
        and isinstance(data.get("run"), str)
        and isinstance(data.get("files"), dict)
        and all(isinstance(v, dict) for v in data["files"].values())
    )
    if not ok or data is None:
        raise EvidenceError(f"{path}: not a version-{VERSION} run manifest (unreadable or altered)")
    return data


def verify(run_dir: Path, analysis: bool = True) -> str | None:
    """Check the run folder against its manifest before anything reads it. Returns a warning when
    the folder has none (a run from before manifests: judged as before); raises EvidenceError
    naming the first missing, foreign, altered or unlisted piece of evidence. `analysis=False`
    leaves out analysis/ (what a re-reconcile is about to replace)."""
    run_dir = Path(run_dir).resolve()
    if not run_dir.is_dir():
        raise EvidenceError(f"{run_dir}: no such run folder")
    if not check_kind(run_dir / MANIFEST, "the manifest"):
        evidence_files(run_dir, analysis)  # the file kinds are checked all the same
        run = runrecord.read_or_none(run_dir) if check_kind(runrecord.path_of(run_dir)) else None
        if run is not None and run.get("manifest"):
            raise EvidenceError(f"{run_dir / MANIFEST}: missing evidence (run.json says the run was sealed)")
        return f"{run_dir}: no {MANIFEST} (a run folder from before manifests): its evidence is not checked"
    m = load(run_dir)
    run_id = m["run"]
    present = set(evidence_files(run_dir, analysis))  # the file kinds before anything is opened
    run = runrecord.read_or_none(run_dir) if "run.json" in present else None
    if "run.json" in m["files"] and "run.json" in present and run is None:
        raise EvidenceError(f"{run_dir / 'run.json'}: not a JSON object (altered evidence)")
    if run is not None and run_id_of(run) not in (None, run_id):
        raise EvidenceError(
            f"{run_dir / 'run.json'}: foreign evidence: run {run_id_of(run)!r}, "
            f"the manifest's run is {run_id!r}"
        )
    summary = _read_object(run_dir / SUMMARY) if SUMMARY in present else None
    if summary is not None and summary.get("run") not in (None, run_id):
        raise EvidenceError(
            f"{run_dir / SUMMARY}: foreign evidence: run {summary.get('run')!r}, "
            f"the manifest's run is {run_id!r}"
        )
    listed = {k for k in m["files"] if analysis or not k.startswith("analysis/")}
    for rel in sorted(listed):
        path = run_dir / rel
        if rel not in present:
            raise EvidenceError(f"{path}: missing evidence (the manifest of run {run_id} lists it)")
        want, got = m["files"][rel], describe(run_dir, rel)
        if any(want.get(k) != got.get(k) for k in ("size", "sha256")):
            raise EvidenceError(f"{path}: altered evidence (its size or sha256 is not the one sealed)")
    extra = sorted(present - listed)
    if extra:
        raise EvidenceError(f"{run_dir / extra[0]}: evidence the manifest of run {run_id} does not list")
    return None


# -- what belongs to the run in time ----------------------------------------------------------
def _finite(values: Any) -> list[float]:
    if not isinstance(values, dict):
        return []
    return [
        float(x)
        for x in values.values()
        if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
    ]


def run_window(run: dict[str, Any] | None) -> tuple[float, float]:
    """[first agent launched, last agent stopped] ± WINDOW_SLACK_S from run.json's observations;
    without them, any plausible Unix time in seconds: [0, MAX_TS]."""
    obs = (run or {}).get("observations")
    obs = obs if isinstance(obs, dict) else {}
    launched, stopped = _finite(obs.get("agents_launched_ts")), _finite(obs.get("agents_stopped_ts"))
    lo = max(0.0, min(launched) - WINDOW_SLACK_S) if launched else 0.0
    hi = min(MAX_TS, max(stopped) + WINDOW_SLACK_S) if stopped else MAX_TS
    if launched and stopped and hi < lo:  # observations that contradict themselves: no window
        return 0.0, MAX_TS
    return lo, hi


def ts_ok(ts: Any, window: tuple[float, float]) -> bool:
    """A record time the readers may use: a finite number of seconds inside the run's window."""
    if isinstance(ts, bool) or not isinstance(ts, int | float):
        return False
    return math.isfinite(ts) and window[0] <= ts <= window[1]
