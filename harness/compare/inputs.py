"""A side of `bfh compare`: a scorecard file (harness/contracts/scorecard.py), a run folder, or a
folder of run folders (harness/verdict/scorecard.py builds their scorecard from disk).

A scorecard file is read as any user's input (harness/topology/files.py: a regular file, at most
MAX_SCORECARD_BYTES, a FIFO never waited on); a run folder through the checks `bfh judge` makes
(harness/contracts/manifest.py: its manifest, its run id), and its verdict must be its own run's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.contracts import manifest
from harness.contracts.scorecard import Scorecard, ScorecardError, parse
from harness.topology.files import InputFileError, check_input, read_input

#: far above a real scorecard (100 rounds of 20 measures of 1,000 samples is about 40 MB's JSON);
#: parsing takes about 15 times the file in memory
MAX_SCORECARD_BYTES = 64 << 20


class CompareError(ValueError):
    """A side that cannot be read (one line: the path and why)."""


def load_side(side: str | Path | Scorecard | Mapping[str, Any]) -> dict[str, Any]:
    """The scorecard of one side, as its JSON dict (the `source` key says where it came from)."""
    if isinstance(side, Scorecard):
        return side.model_dump(mode="json", by_alias=True)
    if isinstance(side, Mapping):
        try:
            data = {k: v for k, v in side.items() if k != "path"}  # a side this module loaded before
            return {**parse(data).model_dump(mode="json", by_alias=True), "path": side.get("path")}
        except ScorecardError as e:
            raise CompareError(str(e)) from None
    path = Path(side)
    unsealed: list[str] = []
    try:
        if path.is_dir():
            card, unsealed = _from_folders(path)
        elif path.exists() or path.is_symlink():
            card = read_scorecard(path)
        else:
            raise CompareError(f"{path}: no such file or folder")
    except (ScorecardError, manifest.EvidenceError, InputFileError) as e:
        raise CompareError(" ".join(str(e).split())) from None
    except OSError as e:
        raise CompareError(f"{path}: cannot be read ({e.strerror or e})") from None
    out = card.model_dump(mode="json", by_alias=True)
    out["path"] = str(path)
    out["unsealed"] = unsealed
    return out


def read_scorecard(path: Path | str) -> Scorecard:
    """A scorecard file read as a user's input: ScorecardError or InputFileError (one line)."""
    path = Path(path)
    check_input(path, MAX_SCORECARD_BYTES)  # by its size, before a byte is read
    data = read_input(path, MAX_SCORECARD_BYTES)
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise ScorecardError(f"{path}: not JSON ({e})") from None
    return parse(doc, str(path))


def _from_folders(path: Path) -> tuple[Scorecard, list[str]]:
    """The run folders' scorecard, each folder checked against its manifest first (as `bfh judge`
    does) and its verdict.json checked to be its own run's; the folders with no manifest."""
    from harness.verdict.scorecard import run_folders, scorecard_from_runs

    dirs, unsealed = run_folders(path), []
    for d in dirs:
        if manifest.verify(d) is not None:  # a folder from before manifests: not checked
            unsealed.append(str(d))
    return scorecard_from_runs(dirs), unsealed


def identity(card: Mapping[str, Any]) -> dict[str, Any]:
    """What the output says about a side: where it came from, which agent and harness, how many
    rounds, and the machine's worst load over its rounds."""
    rounds = [r for e in card.get("entries") or [] for r in e.get("rounds") or []]
    loads = [float(x) for r in rounds if (x := (r.get("load") or {}).get("load_avg_max")) is not None]
    agent = card.get("agent") or {}
    return {
        "path": card.get("path"),
        "source": card.get("source"),
        "created": card.get("created"),
        "harness_version": card.get("harness_version"),
        "agent_version": agent.get("version", ""),
        "agent_command_sha256": agent.get("command_sha256", ""),
        "entries": len(card.get("entries") or []),
        "rounds": len(rounds),
        "load_avg_max": max(loads) if loads else None,
        "unsealed": len(card.get("unsealed") or []),  # run folders with no manifest: not checked
    }
