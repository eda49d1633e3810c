"""Writing a run folder's sample files (load.jsonl, broker-usage.jsonl) whole and at once: a
reader never sees half a file, even if the run is stopped while it is written."""

from __future__ import annotations

import json
import os
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
