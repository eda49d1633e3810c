"""Stage 0: the run folders' small files, read on the driver (run.json and the fault log)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.contracts.faultlog import Window, read_windows


class InputError(ValueError):
    """Bad input: reported as one line, exit status 2."""


@dataclass
class RunInput:
    run_dir: Path
    run_json: dict[str, Any] | None
    faults: list[Window] = field(default_factory=list)  # the windows that started, in start order
    fault_lines_malformed: int = 0
    fault_examples: list[str] = field(default_factory=list)


def _read_json_object(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def load_inputs(run_dirs: list[Path]) -> list[RunInput]:
    out = []
    for d in run_dirs:
        log = read_windows(d / "faults.jsonl")
        out.append(RunInput(d, _read_json_object(d / "run.json"), log.windows, log.malformed, log.examples))
    return out


def run_id_from_json(run_json: dict[str, Any] | None) -> str | None:
    if not run_json:
        return None
    for key in ("run", "run_id", "id"):
        value = run_json.get(key)
        if isinstance(value, str) and value:
            return value
    return None
