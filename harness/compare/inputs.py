"""A side of `bfh compare`: a scorecard file (harness/contracts/scorecard.py), a run folder, or a
folder of run folders (harness/verdict/scorecard.py builds their scorecard from disk)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.contracts.scorecard import Scorecard, ScorecardError, load_scorecard


class CompareError(ValueError):
    """A side that cannot be read (one line: the path and why)."""


def load_side(side: str | Path | Scorecard | Mapping[str, Any]) -> dict[str, Any]:
    """The scorecard of one side, as its JSON dict (the `source` key says where it came from)."""
    if isinstance(side, Scorecard):
        return side.model_dump(mode="json", by_alias=True)
    if isinstance(side, Mapping):
        from harness.contracts.scorecard import parse

        try:
            data = {k: v for k, v in side.items() if k != "path"}  # a side this module loaded before
            return {**parse(data).model_dump(mode="json", by_alias=True), "path": side.get("path")}
        except ScorecardError as e:
            raise CompareError(str(e)) from None
    path = Path(side)
    try:
        if path.is_dir():
            from harness.verdict.scorecard import scorecard_from_runs

            card = scorecard_from_runs(path)
        elif path.exists():
            card = load_scorecard(path)
        else:
            raise CompareError(f"{path}: no such file or folder")
    except ScorecardError as e:
        raise CompareError(" ".join(str(e).split())) from None
    except OSError as e:
        raise CompareError(f"{path}: cannot be read ({e.strerror or e})") from None
    out = card.model_dump(mode="json", by_alias=True)
    out["path"] = str(path)
    return out


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
    }
