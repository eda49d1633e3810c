"""A run folder's sample files (load.jsonl, broker-usage.jsonl): written whole and at once (a
reader never sees half a file, even if the run is stopped while it is written), read leniently."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_atomic(path: Path, rows: list[dict[str, Any]]) -> Path:
    """One compact JSON object a line, through a temporary file renamed over `path`."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def num(x: Any) -> float | None:
    """A finite number as a float; None for anything else (booleans included)."""
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        return None
    return float(x)


def read_samples(path: Path, keep: Callable[[dict[str, Any]], bool] = lambda r: True) -> list[dict[str, Any]]:
    """The samples of `path` in time order; [] when there is no such file. Lines that are not an
    object with a finite `ts`, or that `keep` refuses, are skipped."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict) and num(r.get("ts")) is not None and keep(r):
            rows.append(r)
    return sorted(rows, key=lambda r: float(r["ts"]))
