"""What a checker reads: one reconciled run, loaded from its folder (never Spark).

Everything a verdict depends on is on disk, so re-judging a run folder gives the verdict the run
got: analysis/summary.json (the reconciliation's counts), run.json (agents, scenario, the
harness's own observations), faults.jsonl, agents/*/messages.jsonl and brokers/*/broker.log.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from harness.faultlog import Window, read_windows
from harness.msglog import iter_records
from harness.verdict.witness import BrokerView
from harness.witness.events import EVENTS_FILE, read_events


class VerdictError(RuntimeError):
    """The run folder cannot be judged (not a verdict: e.g. it has no message logs)."""


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _link_broker(lk: dict[str, Any]) -> str:
    if lk.get("broker"):
        return str(lk["broker"])
    name = str(lk.get("name", ""))  # run folders from before links named their broker
    return name.rsplit("-", 1)[0] if "-" in name else name


@dataclass
class RunView:
    run_dir: Path
    summary: dict[str, Any]
    run: dict[str, Any]
    records: dict[str, list[dict[str, Any]]]  # agent -> its log records, in ts order
    faults: list[Window]

    @classmethod
    def load(cls, run_dir: Path, summary: dict[str, Any] | None = None) -> RunView:
        run_dir = Path(run_dir).resolve()
        if not run_dir.is_dir():
            raise VerdictError(f"{run_dir}: no such run folder")
        if summary is None:
            summary = _read_json(run_dir / "analysis" / "summary.json")
        records: dict[str, list[dict[str, Any]]] = {}
        for log in sorted((run_dir / "agents").glob("*/messages.jsonl")):
            recs = [r for r in iter_records(log) if isinstance(r.get("ts"), int | float)]
            records[log.parent.name] = sorted(recs, key=lambda r: r["ts"])
        return cls(
            run_dir,
            summary,
            _read_json(run_dir / "run.json"),
            records,
            read_windows(run_dir / "faults.jsonl").windows,
        )

    # -- what the harness recorded ---------------------------------------------------------------
    @property
    def scenario(self) -> dict[str, Any]:
        return self.run.get("scenario") or {}

    @property
    def params(self) -> dict[str, Any]:
        return self.scenario.get("params") or {}

    @property
    def observations(self) -> dict[str, Any]:
        return self.run.get("observations") or {}

    @cached_property
    def agents(self) -> dict[str, dict[str, Any]]:
        """agent name -> {conf (redacted), workload, command} from run.json."""
        return {a["name"]: a for a in self.run.get("agents") or [] if isinstance(a, dict) and "name" in a}

    def urls(self, agent: str) -> list[str]:
        raw = str((self.agents.get(agent) or {}).get("conf", {}).get("mb.urls", ""))
        return [u.strip() for u in raw.split(",") if u.strip()]

    def publisher_timeout(self, agent: str) -> float | None:
        try:
            return float((self.agents.get(agent) or {}).get("conf", {}).get("mb.publisher.timeout"))
        except (TypeError, ValueError):
            return None

    @cached_property
    def broker_of(self) -> dict[str, str]:
        """An address an agent dials (proxy listen, with or without scheme) -> broker name."""
        out: dict[str, str] = {}
        for lk in self.run.get("links") or []:
            if lk.get("kind", "client") == "bridge":
                continue
            broker = _link_broker(lk)
            listen = str(lk.get("listen", ""))
            out[listen] = broker
            out[listen.split("://")[-1]] = broker
        return out

    def broker(self, url: str | None) -> str | None:
        if not url:
            return None
        return self.broker_of.get(url) or self.broker_of.get(url.split("://")[-1])

    @cached_property
    def link_broker(self) -> dict[str, str]:
        """proxied link name -> the broker it leads to (client links only)."""
        out: dict[str, str] = {}
        for lk in self.run.get("links") or []:
            if lk.get("kind", "client") != "bridge":
                out[str(lk.get("name", ""))] = _link_broker(lk)
        return out

    @cached_property
    def groups(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for b, info in (self.run.get("brokers") or {}).items():
            out.setdefault(str(info.get("group")), []).append(b)
        return out

    def affected_brokers(self, w: Window) -> set[str]:
        """Brokers whose client connections a fault window cuts, stops or silences."""
        out: set[str] = set()
        for t in w.target.split(","):
            if t in (self.run.get("brokers") or {}):
                out.add(t)
            elif t in self.groups:
                out.update(self.groups[t])
            elif t in self.link_broker:
                out.add(self.link_broker[t])
        return out

    def events(self, event: str) -> list[dict[str, Any]]:
        return sorted(
            (r for rs in self.records.values() for r in rs if r.get("event") == event), key=lambda r: r["ts"]
        )

    @cached_property
    def broker_logs(self) -> dict[str, list[str]]:
        return {
            p.parent.name: p.read_text(encoding="utf-8", errors="replace").splitlines()
            for p in sorted(self.run_dir.glob("brokers/*/broker.log"))
        }

    @cached_property
    def broker_events(self) -> list[dict[str, Any]]:
        """brokers/events.jsonl (the broker witness), in ts order; empty when the run has none."""
        return list(read_events(self.run_dir / "brokers" / EVENTS_FILE))

    @cached_property
    def witness(self) -> BrokerView:
        """The brokers' consumers over time; members killed or stopped (faults.jsonl) hold none."""
        down: dict[str, list[tuple[float, float, str]]] = {}
        starts = [(w.start, self.affected_brokers(w)) for w in self.faults if w.fault == "start"]
        for w in self.faults:
            if w.fault not in ("kill", "stop"):
                continue
            for b in self.affected_brokers(w):
                back = min((t for t, bs in starts if b in bs and t > w.start), default=float("inf"))
                down.setdefault(b, []).append((w.start, back, f"{w.fault} ({w.fault_id})"))
        return BrokerView(self.broker_events, down)

    def group_of(self, broker: str | None) -> str | None:
        info = (self.run.get("brokers") or {}).get(broker or "")
        return str(info.get("group")) if info else None

    def traffic_end(self) -> float:
        ts = [
            r["ts"] for rs in self.records.values() for r in rs if r.get("event") in ("sent", "send_attempt")
        ]
        return max(ts, default=0.0)
