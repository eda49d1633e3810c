"""The fault-log contract (`RUN_DIR/faults.jsonl`, docs/contracts.md): one writer, one tolerant
reader. A fault is a window: `fault_start` when applied, `fault_end` when healed (for a kill, when
the group serves again); the end record's params (new_master, takeover_s, ...) add to the start's.
"""

from __future__ import annotations

import itertools
import json
import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EVENTS = ("fault_start", "fault_end")


class FaultLog:
    """Thread-safe writer: one JSON object per line, appended and closed per record."""

    def __init__(self, path: Path, run_id: str) -> None:
        self.path = path
        self.run_id = run_id
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def new_id(self, fault: str) -> str:
        return f"f{next(self._ids):03d}-{fault}"

    def write(self, fault_id: str, event: str, fault: str, target: str, params: dict[str, Any]) -> None:
        rec = {
            "ts": time.time(),
            "run": self.run_id,
            "fault_id": fault_id,
            "event": event,
            "fault": fault,
            "target": target,
            "params": params,
        }
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")


@dataclass
class Window:
    fault_id: str
    fault: str
    target: str
    start: float
    end: float | None  # None: never healed
    params: dict[str, Any] = field(default_factory=dict)

    def covers(self, ts: float, before: float = 0.0, after: float = 0.0) -> bool:
        end = self.end if self.end is not None else float("inf")
        return self.start - before <= ts <= end + after


@dataclass
class FaultLogRead:
    windows: list[Window]  # the windows that started, in start order
    malformed: int = 0
    examples: list[str] = field(default_factory=list)  # the first malformed lines


def _ts(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def read_windows(path: Path, examples: int = 5) -> FaultLogRead:
    """Parse faults.jsonl tolerantly: a torn or foreign line is counted, never fatal."""
    found: dict[str, dict[str, Any]] = {}
    out = FaultLogRead([])
    if not Path(path).is_file():
        return out
    with Path(path).open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            text = line.strip()
            if not text:
                continue
            try:
                rec = json.loads(text)
            except ValueError:
                rec = None
            ts = _ts(rec.get("ts")) if isinstance(rec, dict) else None
            ok = isinstance(rec, dict) and rec.get("fault_id") is not None and rec.get("event") in EVENTS
            if not ok or ts is None or not isinstance(rec, dict):
                out.malformed += 1
                if len(out.examples) < examples:
                    out.examples.append(text[:200])
                continue
            w = found.setdefault(str(rec["fault_id"]), {"params": {}})
            w.setdefault("fault", rec.get("fault"))
            w.setdefault("target", rec.get("target"))
            if isinstance(rec.get("params"), dict):
                w["params"] = {**w["params"], **rec["params"]}
            key, pick = ("start", min) if rec["event"] == "fault_start" else ("end", max)
            w[key] = ts if w.get(key) is None else pick(w[key], ts)
    out.windows = sorted(
        (
            Window(fid, str(w["fault"]), str(w["target"]), w["start"], w.get("end"), w["params"])
            for fid, w in found.items()
            if w.get("start") is not None
        ),
        key=lambda w: (w.start, w.fault_id),
    )
    return out
