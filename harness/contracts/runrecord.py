"""The run record, RUN_DIR/run.json (docs/contracts.md, "Run record"): its one owner.

One writer, `update()`: merge top-level fields into the file (atomically; every stage of a run
adds its part: the environment, the run loop, the seal). One reader, `read()`: the record as
written, a JSON object or None when absent, so the verdict can check its types itself and an old
folder's unknown keys come through untouched. `RunRecord` is the typed model of the fields the
harness writes and reads; keys it does not name are kept (`extra="allow"`), so old folders load.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

RUN_JSON = "run.json"


class RunRecordError(ValueError):
    """run.json is there but cannot be read as a JSON object (the callers word it as theirs)."""


class Scenario(BaseModel):
    """`scenario`: the catalog entry a re-judge from disk gates the same way."""

    model_config = ConfigDict(extra="allow")
    name: str | None = None
    what: str | None = None
    gates: list[str] | None = None
    params: dict[str, Any] | None = None


class Observations(BaseModel):
    """`observations`: what the harness saw that no log holds."""

    model_config = ConfigDict(extra="allow")
    masters: dict[str, Any] | None = None
    agents_launched_ts: dict[str, float] | None = None
    agents_stopped_ts: dict[str, float] | None = None
    agent_exit: dict[str, int | None] | None = None
    agents_exited_early: list[str] | None = None
    not_subscribed: list[str] | None = None
    not_publishing: list[str] | None = None
    stalled: bool | None = None
    nemesis_errors: list[str] | None = None
    proxy_connections: dict[str, Any] | None = None
    load: dict[str, Any] | None = None  # the machine's load (harness/contracts/loadlog.py summarize)
    broker_usage: dict[str, Any] | None = None  # harness/contracts/brokerusage.py summarize


class RunRecord(BaseModel):
    """run.json's fields (every one optional: a folder holds what its run got to write)."""

    model_config = ConfigDict(extra="allow")
    run: str | None = None
    seed: int | None = None
    backend: str | None = None
    topology: dict[str, Any] | None = None
    fault_proxy: dict[str, Any] | None = None
    versions: dict[str, str] | None = None
    links: list[dict[str, Any]] | None = None
    brokers: dict[str, Any] | None = None
    agents: list[dict[str, Any]] | None = None
    schedule: dict[str, Any] | None = None
    scenario: Scenario | None = None
    observations: Observations | None = None
    phases_s: dict[str, float] | None = None
    manifest: str | None = None


def path_of(run_dir: Path) -> Path:
    return Path(run_dir) / RUN_JSON


def run_id_of(run: dict[str, Any] | None) -> str | None:
    """The run id a record holds (the reconciliation's rule: `run`, `run_id` or `id`)."""
    for key in ("run", "run_id", "id"):
        value = (run or {}).get(key)
        if isinstance(value, str) and value:
            return value
    return None


# -- the reader -------------------------------------------------------------------------------
def read(run_dir: Path) -> dict[str, Any] | None:
    """run.json as written: None when absent; RunRecordError when it is not a regular file, cannot
    be read, is not JSON or not an object."""
    path = path_of(run_dir)
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise RunRecordError(f"{path}: not a regular file")
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise RunRecordError(f"{path}: cannot be read ({getattr(e, 'strerror', None) or e})") from None
    except ValueError as e:
        raise RunRecordError(f"{path}: not JSON ({e})") from None
    if not isinstance(data, dict):
        raise RunRecordError(f"{path}: not a JSON object")
    return data


def read_or_none(run_dir: Path) -> dict[str, Any] | None:
    """`read`, with None for a record that is absent or unreadable (a best-effort reader)."""
    try:
        return read(run_dir)
    except RunRecordError:
        return None


def load(run_dir: Path) -> RunRecord:
    """The typed record (an empty one when absent); pydantic's ValidationError when a field the
    model names has another type."""
    return RunRecord.model_validate(read(run_dir) or {})


# -- the writer -------------------------------------------------------------------------------
def update(run_dir: Path, **fields: Any) -> dict[str, Any]:
    """Merge top-level `fields` into run.json (callers pass redacted data only) and return the
    record written. Fields are checked against the model first; the file keeps what it had."""
    data = read(run_dir) or {}
    data.update(fields)
    RunRecord.model_validate(json.loads(json.dumps(fields, default=str)))
    path = path_of(run_dir)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:  # never a half-written record: a crash leaves the old one
        tmp.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return data
