"""The one verdict: every checker runs, the verdict is the list of broken gated promises.

`judge(run_dir)` reads the run from disk (so pytest, `bfh validate`, `bfh run`, `bfh report` and
`bfh judge RUN_DIR` agree), writes its own file, analysis/verdict.json (`checks`, `verdict`,
`broken`, `gates`, `reported`, ...), leaves the reconciliation's analysis/summary.json as Spark
wrote it, and returns a `Verdict`. `judged_summary(run_dir)` is the two read together.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.verdict import blame as blaming
from harness.verdict import evidence, overload, races
from harness.verdict.checks import PROMISES, Check
from harness.verdict.checks.applicable import PROMISE as APPLICABLE
from harness.verdict.view import RunView, VerdictError

#: computed and reported on every run, gated only where a scenario names them: a broker finding.
#: consumer_confirmed is gated: its false flags were a consumer removed within the tolerance (a cut,
#: a reset, a kill right after the SUBACK), now confirmed by any sighting in the window, and claims
#: at a fault's instant, now unknown; the tolerance grows by the run's observer lag (docs/verdict.md)
REPORTED_ONLY = ("broker_consumers",)
#: what a scenario gates unless it says otherwise: every other promise
DEFAULT_GATES: tuple[str, ...] = tuple(p for p in PROMISES if p not in REPORTED_ONLY)
#: gated whatever a scenario says: a run that proves nothing, or is judged on evidence that is not
#: its own, is never a pass
ALWAYS_GATED = ("non_vacuous", evidence.PROMISE)
#: the judge's own file (the reconciliation's summary.json is Spark's, never rewritten)
VERDICT_FILE = "analysis/verdict.json"
#: gate policies: `all` counts every anomaly; `agent` only those blamed on the agent
GATE_POLICIES = ("all", "agent")
#: findings about the brokers: warnings, not gated, under `--gate agent`
BROKER_PROMISES = ("broker_consumers", "bridge_health", "paths")


@dataclass
class Verdict:
    #: pass | fail | n/a (the agent refused what the run needs, e.g. ssl:// URLs) | unknown (a
    #: checker crashed on this run's data: exit 2, never a pass nor a fail)
    verdict: str
    checks: list[Check]
    gates: list[str]
    run_dir: Path
    note: str = ""
    broken: list[str] = field(default_factory=list)  # gated promises that failed
    reported: list[str] = field(default_factory=list)  # failed but not gated by this scenario
    gate: str = "all"  # the gate policy (GATE_POLICIES)
    warnings: list[str] = field(default_factory=list)  # broker findings under `--gate agent`
    blame: dict[str, dict[str, int]] = field(default_factory=dict)  # class -> blame -> count
    #: allowed|breaks -> class -> count: what the contract allows apart from what breaks it
    contract: dict[str, dict[str, int]] = field(default_factory=dict)
    #: the broker-blamed losses by known race, with evidence and measured rate (races.py)
    findings: list[dict[str, Any]] = field(default_factory=list)
    #: hop -> the anomalous deliveries that ended there (the broker's account, blame.py)
    hops: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.verdict in ("pass", "n/a")

    def check(self, promise: str) -> Check:
        return next(c for c in self.checks if c.promise == promise)

    @property
    def why_unknown(self) -> str:
        """Why the verdict is unknown: each gated promise left unknown, with its reason, in short."""
        parts = [
            f"{c.promise}: {_short(c.detail)}"
            for c in self.checks
            if c.status == "unknown" and c.promise in self.gates
        ]
        return "; ".join(parts) or self.note

    def table(self) -> list[dict[str, Any]]:
        return [{**c.to_dict(), "gated": c.promise in self.gates} for c in self.checks]

    def message(self, what: str = "") -> str:
        """Every broken promise, one line each, with its evidence (a pytest failure message)."""
        head = f"{what}: " if what else ""
        lines = [f"{head}verdict {self.verdict.upper()}: {len(self.broken)} broken promise(s) {self.broken}"]
        if self.note:
            lines.append(f"  note: {self.note}")
        for c in self.checks:
            if c.status == "unknown":
                lines.append(f"  UNKNOWN {c.promise}: {c.detail}")
            if c.status != "fail":
                continue
            tag = "BROKEN" if c.promise in self.broken else "reported (not gated)"
            if c.promise in self.warnings:
                tag = "WARNING (broker finding)"
            ev = "; ".join(_evidence_line(e) for e in c.evidence[:3])
            where = f" [fault {c.fault}]" if c.fault else ""
            lines.append(f"  {tag} {c.promise}: {c.count} — {c.detail}{where}; e.g. {ev}")
        tag = "WARNING (broker race, not gated)" if self.gate == "agent" else "broker race"
        lines += [f"  {tag} {races.finding_line(f)}" for f in self.findings]
        if blamed := self.blame_line():
            lines.append(f"  blame: {blamed}")
        if allowed := self.allowed_line():
            lines.append(f"  allowed by the contract (no promise broken): {allowed}")
        lines.append(f"  run folder: {self.run_dir}")
        return "\n".join(lines)

    def blame_line(self) -> str:
        """Whose fault the lost, missed and duplicated deliveries are, e.g. "lost broker=1", with
        the policy that gates only the agent's when the agent is blamed for none of them."""
        parts = []
        for status, by in self.blame.items():
            named = [f"{who}={n}" for who, n in by.items() if n and who != blaming.ALLOWED]
            if named:
                parts.append(f"{status} {' '.join(named)}")
        if not parts:
            return ""
        text = "; ".join(parts)
        if self.gate == "all" and not any(by.get("agent") for by in self.blame.values()):
            text += " (none on the agent: `--gate agent` gates only the agent's)"
        return text

    def allowed_line(self) -> str:
        """e.g. "duplicated=2 (redeliveries on at-least-once subscriptions)"; "" when none."""
        n = {s: k for s, k in (self.contract.get("allowed") or {}).items() if k}
        if not n:
            return ""
        return " ".join(f"{s}={k}" for s, k in n.items()) + " (redeliveries on at-least-once subscriptions)"


def _short(text: str, width: int = 240) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _evidence_line(e: dict[str, Any]) -> str:
    keys = ("msg_id", "agent", "role", "broker", "ts")
    ids = " ".join(f"{k}={e[k]}" for k in keys if e.get(k) is not None)
    return f"{e.get('what', '')} ({ids})" if ids else str(e.get("what", ""))


def checkers() -> dict[str, Any]:
    """Every check the judge runs, read from the registry at each judgement: the promises, then
    the evidence check (harness/verdict/evidence.py)."""
    return {**{p.name: p.check for p in PROMISES.values()}, evidence.PROMISE: evidence.check}


def _run_checker(name: str, checker: Any, v: RunView) -> Check:
    """A checker that raises on this run's data gives `unknown` (never a pass, never a fail)."""
    try:
        return checker(v)
    except Exception as e:  # noqa: BLE001 - any crash is the same verdict: unknown
        what = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        return Check(name, "unknown", detail=f"the checker crashed on this run's data ({what})")


def _require_evidence(v: RunView) -> None:
    """What a harness run always leaves: run.json, and faults.jsonl when its schedule had steps."""
    if not v.has_run_record:
        raise VerdictError(
            f"{v.run_dir}: no run.json (the run's record: scenario, agents, observations): cannot judge"
        )
    steps = (v.run.get("schedule") or {}).get("steps")
    if isinstance(steps, list) and steps and not v.has_fault_log and not v.observations.get("nemesis_errors"):
        raise VerdictError(
            f"{v.run_dir}: no faults.jsonl although run.json's schedule has {len(steps)} fault step(s): "
            "cannot judge (missing evidence)"
        )
    if isinstance(steps, list) and steps and v.has_fault_log and not v.faults and v.fault_log_malformed:
        raise VerdictError(  # as good as missing: no fault to blame anything on
            f"{v.run_dir / 'faults.jsonl'}: not one fault record in it ({v.fault_log_malformed} unreadable "
            f"line(s)) although run.json's schedule has {len(steps)} fault step(s): cannot judge"
        )


def _nothing_to_judge(run_dir: Path) -> str:
    return f"{run_dir}: no agent message logs (agents/*/messages.jsonl): nothing to judge"


def refuse_unjudgeable(run_dir: Path) -> None:
    """The refusal `judge` would give a folder that no harness run wrote and no agent logged in,
    decided from file names alone, so `bfh reconcile` can refuse it before Spark starts."""
    run_dir = Path(run_dir).resolve()
    if not run_dir.is_dir():
        raise VerdictError(f"{run_dir}: no such run folder")
    if any(p.stat().st_size for p in (run_dir / "agents").glob("*/messages.jsonl")):
        return
    if (run_dir / "run.json").is_file():
        return  # a harness run: judged (a run whose agents logged nothing fails)
    raise VerdictError(_nothing_to_judge(run_dir))


def judge(
    run_dir: Path,
    gates: list[str] | tuple[str, ...] | None = None,
    summary: dict[str, Any] | None = None,
    gate: str | None = None,
) -> Verdict:
    """Judge a reconciled run folder; raises VerdictError when it cannot be judged at all.
    `gate` (default: the run's `params.gate`, else `all`): `agent` fails only on anomalies blamed
    on the agent and lists the broker findings as warnings."""
    v = RunView.load(run_dir, summary)
    gate = gate or str(v.params.get("gate") or "all")
    if gate not in GATE_POLICIES:
        raise VerdictError(f"unknown gate policy {gate!r}; known: {', '.join(GATE_POLICIES)}")
    if not v.summary:
        raise VerdictError(
            f"{v.run_dir}: no analysis/summary.json (reconcile it first: bfh reconcile RUN_DIR)"
        )
    _require_evidence(v)
    checkers_now = checkers()
    # "not applicable" is the applicability checker's own result (checks/applicable.py)
    first = _run_checker(APPLICABLE, checkers_now[APPLICABLE], v) if APPLICABLE in checkers_now else None
    refused = first.detail if first is not None and first.status == "n/a" else ""
    if not refused and not v.records and not v.observations.get("agent_exit"):
        # a harness run whose agents logged nothing is judged (and fails); a bare folder is an error
        raise VerdictError(_nothing_to_judge(v.run_dir))
    if gates is None:
        gates = v.scenario.get("gates") or DEFAULT_GATES
    gates = [*gates, *(g for g in ALWAYS_GATED if g not in gates)]
    if any(not isinstance(g, str) for g in gates):
        raise VerdictError(f"{v.run_dir / 'run.json'}: scenario gates must be promise names")
    unknown = sorted(set(gates) - set(checkers_now))
    if unknown:
        raise VerdictError(f"unknown promise(s) {unknown}; known: {', '.join(checkers_now)}")
    checks = [
        first if name == APPLICABLE and first else _run_checker(name, checker, v)
        for name, checker in checkers_now.items()
    ]
    try:
        blamed = blaming.assign(v)
    except Exception as e:  # noqa: BLE001 - e.g. a messages.parquet pyarrow cannot read
        raise VerdictError(f"{v.run_dir}: blame failed ({type(e).__name__}: {e})".splitlines()[0]) from None
    # a timing promise the measured overload explains is inconclusive, not the agent's (overload.py)
    checks, overloaded = overload.apply(v, checks, list(gates))
    checks = [_without_rows(v, c) if c.promise == "at_least_once" else c for c in checks]
    checks, gates, warnings = _apply_gate(gate, checks, list(gates), blamed)
    if refused:
        checks = [Check(c.promise, "n/a", detail="not applicable: " + refused) for c in checks]
    broken = [c.promise for c in checks if c.status == "fail" and c.promise in gates]
    reported = [c.promise for c in checks if c.status == "fail" and c.promise not in gates]
    crashed = [c.promise for c in checks if c.status == "unknown" and c.promise in gates]
    verdict = "n/a" if refused else ("fail" if broken else ("unknown" if crashed else "pass"))
    reported = [p for p in reported if p not in warnings]
    note = _unknown_note(crashed, overloaded) if verdict == "unknown" else refused
    out = Verdict(
        verdict,
        checks,
        list(gates),
        v.run_dir,
        note,
        broken,
        reported,
        gate,
        warnings,
        blaming.counts(blamed),
        blaming.contract(blamed),
        races.findings(blamed),
        dict(Counter(b.hop for b in blamed if b.hop)),
    )
    try:  # written only now that every check is done: blame.parquet, then verdict.json
        if blamed:
            blaming.write(v, blamed)
        _write(v, out)
    except OSError as e:
        raise VerdictError(f"{v.run_dir}: cannot write the verdict: {e.strerror or e}") from None
    except Exception as e:  # noqa: BLE001 - pyarrow refusing a value: nothing half-written
        raise VerdictError(
            f"{v.run_dir}: cannot write the verdict ({type(e).__name__}: {e})".splitlines()[0]
        ) from None
    return out


def _unknown_note(crashed: list[str], overloaded: list[str]) -> str:
    """The note of an unknown verdict: the overload's only over the promises it excused; any other
    unknown promise (a checker that crashed or lacked its evidence) is named apart."""
    excused = [p for p in crashed if p in overloaded]
    others = [p for p in crashed if p not in overloaded]
    parts = [overload.note(excused)] if excused else []
    if others:
        parts.append(f"promise(s) {others} could not be judged (not the machine's load)")
    return "; ".join(parts)


def _without_rows(v: RunView, c: Check) -> Check:
    """at_least_once in a run that sent, reconciled by Spark (its summary's `engine` names the
    messages.parquet it wrote), whose analysis/messages.parquet is gone: the deliveries' rows cannot
    be read, so never a pass (a fail stays a fail)."""
    if c.status != "pass" or (v.run_dir / "analysis" / "messages.parquet").exists():
        return c
    wrote = isinstance(v.summary.get("engine"), dict) and "messages_parquet" in v.summary["engine"]
    if not wrote or not (v.events("sent") or v.events("send_attempt")):
        return c
    detail = (
        "analysis/messages.parquet is missing: the deliveries' rows cannot be read (bfh reconcile RUN_DIR)"
    )
    return Check(
        c.promise, "unknown", c.count, c.evidence, c.fault, detail + (f"; {c.detail}" if c.detail else "")
    )


def _apply_gate(
    gate: str, checks: list[Check], gates: list[str], blamed: list[blaming.Blamed]
) -> tuple[list[Check], list[str], list[str]]:
    """`agent`: at_least_once counts the agent's losses only, the broker promises become warnings."""
    if gate != "agent":
        return checks, gates, []
    checks = [_agent_only(c, blamed) if c.promise == "at_least_once" else c for c in checks]
    warnings = [c.promise for c in checks if c.promise in BROKER_PROMISES and c.status == "fail"]
    return checks, [g for g in gates if g not in BROKER_PROMISES], warnings


def _agent_only(c: Check, blamed: list[blaming.Blamed]) -> Check:
    """at_least_once under `--gate agent`: the lost deliveries blamed on the agent fail it; those
    whose blame is `unknown` (an observer gap) leave it inconclusive, never a pass."""
    lost = [b for b in blamed if b.status == "lost"]
    mine = [b for b in lost if b.blame == "agent"]
    others = ", ".join(f"{k}={n}" for k, n in sorted(Counter(b.blame for b in lost).items()) if k != "agent")
    note = f"gate agent: {len(mine)} of {len(lost)} lost blamed on the agent" + (
        f" ({others})" if others else ""
    )
    unsure = [b for b in lost if b.blame == "unknown"]
    if c.status == "unknown":  # its checker crashed or lacked its evidence: never a pass
        return dataclasses.replace(c, detail=f"{c.detail}; {note}" if c.detail else note)
    if c.status == "fail" and not lost:  # losses counted, none blamed: the rows are missing
        return Check(
            c.promise,
            "unknown",
            c.count,
            c.evidence,
            c.fault,
            f"{note}: {c.count} lost counted but no blame rows to tell whose (analysis/messages.parquet "
            "unreadable or without them): inconclusive",
        )
    if not mine and unsure and c.status == "fail":
        return Check(c.promise, "unknown", len(unsure), _rows(unsure), c.fault, note + ": inconclusive")
    if not mine:
        return Check(c.promise, "pass" if c.status != "n/a" else "n/a", detail=note)
    return Check(c.promise, "fail", len(mine), _rows(mine), c.fault, note, "agent")


def _rows(rows: list[blaming.Blamed]) -> list[dict[str, Any]]:
    return [
        {"msg_id": b.msg_id, "agent": b.subscriber, "ts": b.ts, "what": "; ".join(b.evidence)}
        for b in rows[:5]
    ]


def _write(v: RunView, verdict: Verdict) -> None:
    """analysis/verdict.json, the judge's own file: written whole, atomically."""
    out: dict[str, Any] = dict(
        run=v.summary.get("run"),
        verdict=verdict.verdict,
        broken=verdict.broken,
        reported=verdict.reported,
        gates=verdict.gates,
        checks=verdict.table(),
        scenario=v.scenario.get("name"),
        gate=verdict.gate,
        warnings=[c.to_dict() for c in verdict.checks if c.promise in verdict.warnings],
        blame=verdict.blame,
        contract=verdict.contract,
        broker_races=verdict.findings,
        hops=verdict.hops,
    )
    if verdict.note:
        out["note"] = verdict.note
    path = v.run_dir / VERDICT_FILE
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(out, indent=2, default=str) + "\n", encoding="utf-8")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def read_verdict(run_dir: Path) -> dict[str, Any]:
    """The last judge's analysis/verdict.json, {} when the run was never judged (or unreadable)."""
    try:
        data = json.loads((Path(run_dir) / VERDICT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def judged_summary(run_dir: Path) -> dict[str, Any]:
    """The reconciliation's summary.json with the last judge's verdict.json over it (the verdict's
    keys: `verdict`, `broken`, `checks`, `warnings`, ...), as the readers of a judged run use it.
    A summary.json judged before verdict.json existed carries those keys itself."""
    summary: dict[str, Any] = json.loads(
        (Path(run_dir) / "analysis" / "summary.json").read_text(encoding="utf-8")
    )
    summary.update(read_verdict(run_dir))
    return summary
