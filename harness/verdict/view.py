"""What a checker reads: one reconciled run, loaded from its folder (never Spark).

Everything a verdict depends on is on disk, so re-judging a run folder gives the verdict the run
got: analysis/summary.json (the reconciliation's counts), run.json (agents, scenario, the
harness's own observations), faults.jsonl, agents/*/messages.jsonl and brokers/*/broker.log.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from harness.contracts import manifest, runrecord
from harness.contracts.faultlog import Window, read_windows
from harness.contracts.msglog import clock_offsets, iter_records
from harness.verdict.witness import BrokerView
from harness.witness.events import EVENTS_FILE, read_events


class VerdictError(RuntimeError):
    """The run folder cannot be judged (not a verdict: e.g. it has no message logs)."""


def _read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object file: None when absent; a VerdictError when it is anything but an object."""
    try:
        if not manifest.check_kind(path):
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except manifest.EvidenceError as e:
        raise VerdictError(str(e)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise VerdictError(f"{path}: cannot be read ({getattr(e, 'strerror', None) or e})") from None
    except ValueError as e:
        raise VerdictError(f"{path}: not JSON ({e})") from None
    if not isinstance(data, dict):
        raise VerdictError(f"{path}: not a JSON object")
    return data


#: run.json keys the checkers read, with the JSON type each must have when present (null = absent)
RUN_SHAPE: dict[str, type] = {
    "scenario": dict,
    "observations": dict,
    "agents": list,
    "links": list,
    "brokers": dict,
    "schedule": dict,
}
SCENARIO_SHAPE: dict[str, type] = {"params": dict, "gates": list, "name": str}
OBSERVATION_SHAPE: dict[str, type] = {
    "masters": dict,
    "agents_launched_ts": dict,
    "agents_stopped_ts": dict,
    "agent_exit": dict,
    "agents_exited_early": list,
    "not_subscribed": list,
    "nemesis_errors": list,
}
_JSON_TYPE: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}


def _shape(where: str, data: dict[str, Any], shape: dict[str, type]) -> None:
    for key, kind in shape.items():
        value = data.get(key)
        if value is not None and not isinstance(value, kind):
            raise VerdictError(f"{where}: `{key}` is {json.dumps(value)[:60]}, not {_JSON_TYPE[kind]}")


def check_run_record(path: Path, run: dict[str, Any]) -> None:
    """run.json's keys the verdict reads have the types docs/contracts.md gives them."""
    _shape(str(path), run, RUN_SHAPE)
    _shape(f"{path}: scenario", run.get("scenario") or {}, SCENARIO_SHAPE)
    _shape(f"{path}: observations", run.get("observations") or {}, OBSERVATION_SHAPE)
    for key in ("agents", "links"):
        if any(not isinstance(x, dict) for x in run.get(key) or []):
            raise VerdictError(f"{path}: `{key}` holds an item that is not an object")
    if any(not isinstance(x, dict) for x in (run.get("brokers") or {}).values()):
        raise VerdictError(f"{path}: `brokers` holds an item that is not an object")


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_summary(path: Path, summary: dict[str, Any]) -> None:
    """summary.json's counts are counts (non-negative integers), its examples lists per kind (the
    reasons of a folder reconciled before the verdict owned the limits: a list of objects)."""
    for key in ("totals", "deliveries", "ghosts"):
        part = summary.get(key)
        if part is None:
            continue
        if not isinstance(part, dict):
            raise VerdictError(f"{path}: `{key}` is {json.dumps(part)[:60]}, not an object")
        for k, n in part.items():
            if not _count(n):
                raise VerdictError(f"{path}: `{key}.{k}` is {json.dumps(n)[:60]}, not a count")
    if summary.get("unexpected") is not None and not _count(summary["unexpected"]):
        raise VerdictError(f"{path}: `unexpected` is {json.dumps(summary['unexpected'])[:60]}, not a count")
    reasons = summary.get("reasons")
    if reasons is not None and (
        not isinstance(reasons, list)
        or any(not isinstance(r, dict) or not _count(r.get("count")) for r in reasons)
    ):
        raise VerdictError(f"{path}: `reasons` is not a list of {{kind, count, ...}} objects")
    examples = summary.get("examples")
    if examples is not None and (
        not isinstance(examples, dict) or any(not isinstance(x, list) for x in examples.values())
    ):
        raise VerdictError(f"{path}: `examples` is not an object of msg_id lists per anomaly kind")
    if summary.get("policy") is not None and not isinstance(summary["policy"], dict):
        raise VerdictError(f"{path}: `policy` is not an object")
    if summary.get("run") is not None and not isinstance(summary["run"], str):
        raise VerdictError(f"{path}: `run` is not a string")


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
    records: dict[str, list[dict[str, Any]]]  # agent -> its log records (this run's), in ts order
    faults: list[Window]
    #: what the logs hold that is not this run's evidence (never in `records`): records of another
    #: run (agent -> count, and the runs they name), records whose ts is not a finite time inside
    #: the run's window (agent -> count), and a few of each
    foreign: dict[str, int] = field(default_factory=dict)
    foreign_runs: dict[str, int] = field(default_factory=dict)
    bad_ts: dict[str, int] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)
    run_id: str | None = None
    has_run_record: bool = True  # run.json exists
    has_fault_log: bool = True  # faults.jsonl exists
    fault_log_malformed: int = 0  # its lines that are no fault record (torn, foreign, not JSON)

    @classmethod
    def load(cls, run_dir: Path, summary: dict[str, Any] | None = None) -> RunView:
        run_dir = Path(run_dir).resolve()
        if not run_dir.is_dir():
            raise VerdictError(f"{run_dir}: no such run folder")
        try:  # every evidence file is a regular file before any is opened (a FIFO would block)
            manifest.evidence_files(run_dir)
        except manifest.EvidenceError as e:
            raise VerdictError(str(e)) from None
        summary_path = run_dir / "analysis" / "summary.json"
        if summary is None:
            summary = _read_json(summary_path) or {}
        check_summary(summary_path, summary)
        run_path = runrecord.path_of(run_dir)
        try:
            run = runrecord.read(run_dir)
        except runrecord.RunRecordError as e:
            raise VerdictError(str(e)) from None
        check_run_record(run_path, run or {})
        run_id = manifest.run_id_of(run)
        other = summary.get("run")
        if run_id and other and other != run_id:
            raise VerdictError(
                f"{summary_path}: foreign evidence: the summary of run {other!r}, "
                f"run.json's run is {run_id!r}"
            )
        run_id = run_id or other or None
        window = manifest.run_window(run)
        records: dict[str, list[dict[str, Any]]] = {}
        foreign: Counter[str] = Counter()
        foreign_runs: Counter[str] = Counter()
        bad_ts: Counter[str] = Counter()
        examples: list[dict[str, Any]] = []
        offsets = clock_offsets(run)  # an agent on another host's clock (--backend swarm)
        for log in sorted((run_dir / "agents").glob("*/messages.jsonl")):
            agent, recs = log.parent.name, []
            for r in iter_records(log, offset_s=offsets.get(log.parent.name, 0.0)):
                ts = r.get("ts")
                if run_id is not None and r.get("run") is not None and r.get("run") != run_id:
                    foreign[agent] += 1
                    foreign_runs[str(r.get("run"))] += 1
                    if len(examples) < 5:
                        examples.append(
                            {"agent": agent, "what": f"a record of run {str(r.get('run'))[:80]!r}"}
                        )
                elif not manifest.ts_ok(ts, window):
                    if ts is None or isinstance(ts, bool) or not isinstance(ts, int | float):
                        continue  # no time at all: the reconciliation's malformed record
                    bad_ts[agent] += 1
                    if len(examples) < 10:
                        examples.append({"agent": agent, "what": f"ts {ts!r} outside the run's window"})
                else:
                    recs.append(r)
            recs.sort(key=lambda r: r["ts"])
            records[agent] = recs
        fault_log = read_windows(run_dir / "faults.jsonl")
        return cls(
            run_dir,
            summary,
            run or {},
            records,
            fault_log.windows,
            dict(foreign),
            dict(foreign_runs),
            dict(bad_ts),
            examples,
            run_id,
            run is not None,
            (run_dir / "faults.jsonl").exists(),
            fault_log.malformed,
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

    @cached_property
    def subscription_index(self) -> dict[str, dict[Any, int]]:
        """agent -> its workload's subscription filters -> their index (the client id's `s<index>`)."""
        out: dict[str, dict[Any, int]] = {}
        for name, a in self.agents.items():
            wl = a.get("workload") or {}
            subs = [s.get("topic") for s in wl.get("subscriptions") or [] if isinstance(s, dict)]
            index: dict[Any, int] = {}
            for i, topic in enumerate(subs):
                index.setdefault(topic, i)
            out[name] = index
        return out

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
        return self._traffic_end

    def run_end(self) -> float:
        """The run's last own time: the latest agent record (0.0 without any); a timeline the
        checkers step along ends here, never at an open end (an inf)."""
        return self._run_end

    @cached_property
    def _run_end(self) -> float:
        return max((r["ts"] for rs in self.records.values() for r in rs), default=0.0)

    @cached_property
    def _traffic_end(self) -> float:
        ts = [
            r["ts"] for rs in self.records.values() for r in rs if r.get("event") in ("sent", "send_attempt")
        ]
        return max(ts, default=0.0)

    @cached_property
    def consumer_client_ids(self) -> frozenset[str]:
        """Every client id the broker witness saw a consumer of."""
        return frozenset(
            str(r.get("client_id")) for r in self.broker_events if r.get("event") == "consumer_added"
        )
