"""The conformance catalog as pytest items (collected by the pytest plugin, harness.pytest_plugin.plugin,
in any repository; this checkout's scenarios/test_catalog.py imports the same function).

Every entry of harness.catalog.scenarios.SCENARIOS runs against real brokers, the fault proxy, the agent
(the reference agent unless --bfh-agent-cmd / --bfh-agent-cmd-only) and the Spark reconciliation, and is
judged by harness.verdict. A failure lists every broken promise with its evidence. Select with the
entries' tags (`-k masterslave`, `-k network`, `-k partition`, `-k security`, `-k protocols`) or
by name (`--bfh-scenarios masterslave,pause-master`).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.catalog import scenarios as catalog
from harness.pytest_plugin.scorecard import RUN_DIRS
from harness.run import rounds
from harness.verdict import Verdict, judge, races


def assert_verdict(result: Any, what: str, unknown: str = "fail", reruns: int = 0) -> Verdict:
    """The run's verdict passes (or is not applicable); the failure lists every broken promise.
    An unknown verdict is inconclusive: a failure that says why, or with `unknown="skip"` (the
    explicit opt-in, --bfh-unknown=skip) a skip; never a pass (harness.run.rounds)."""
    v: Verdict | None = result.verdict
    assert v is not None, f"{what}: the run was not judged; run folder {result.run_dir}"
    again = judge(result.run_dir)  # the same verdict from disk (bfh judge RUN_DIR)
    assert (again.verdict, again.broken) == (v.verdict, v.broken), f"re-judged {again.broken} != {v.broken}"
    if v.verdict == "unknown":
        line = f"{what}: {rounds.inconclusive_line(v.why_unknown, reruns)}"
        if unknown == "skip":
            pytest.skip(f"{line} (--bfh-unknown=skip)\n{v.message(what)}")
        pytest.fail(f"{line}\n{v.message(what)}", pytrace=False)
    if v.verdict == "fail" and _only_named_broker_races(result.run_dir, v):
        warn_broker_races(v, what)  # the broker's finding, named and measured: not the agent's fail
        return v
    assert v.verdict in ("pass", "n/a"), v.message(what)  # never a fail
    warn_broker_races(v, what)
    return v


def _only_named_broker_races(run_dir: Any, v: Verdict) -> bool:
    """Whether a strictly gated failure is only known broker races: the agent gate passes the run,
    and every broker-blamed loss names a race (docs/verdict.md "Broker races"). An unnamed one, or
    anything on the agent, still fails."""
    if v.gate != "all" or not v.findings or any(f.get("race") == races.UNNAMED.name for f in v.findings):
        return False
    agent_view = judge(run_dir, gate="agent")
    judge(run_dir)  # the folder keeps its own gate's verdict.json
    return agent_view.verdict in ("pass", "n/a")


def warn_broker_races(v: Verdict, what: str) -> None:
    """A broker race the agent gate did not count: in pytest's warnings summary, never silent."""
    for f in v.findings:
        warnings.warn(races.BrokerRace(f"{what}: {races.finding_line(f)}; {v.run_dir}"), stacklevel=3)


def entry_id(sc: catalog.Scenario) -> str:
    return sc.name if sc.topology == "pair" else f"{sc.name}@{sc.topology}"


def _params() -> list[Any]:
    return [
        pytest.param(
            sc,
            id=entry_id(sc),
            marks=[getattr(pytest.mark, t) for t in sc.tags] + [pytest.mark.broker, pytest.mark.spark],
        )
        for sc in catalog.SCENARIOS.values()
    ]


@dataclass(frozen=True)
class _Session:
    """What every catalog run of the session shares (the plugin's fixtures)."""

    reports: Path
    backend: str
    agent_cmd: str | None
    agent_protocol: str | None
    gate: str
    fleet: int | None

    def run(self, entry: catalog.Scenario, **kw: Any) -> catalog.Outcome:
        return catalog.run(
            entry,
            catalog.topology_named(entry.topology),
            agent_cmd=self.agent_cmd,
            reports=self.reports,
            backend=self.backend,
            show_progress=False,
            gate=self.gate,
            # --bfh-fleet resizes the fleet entries only (a single-agent entry stays one agent)
            fleet=self.fleet if entry.agents == "fleet" else None,
            agent_protocol=self.agent_protocol,
            **kw,
        )


@pytest.mark.parametrize("entry", _params())
def test_scenario(
    entry: catalog.Scenario,
    reports_root: Path,
    backend_kind: str,
    agent_cmd: str | None,
    bfh_agent_protocol: str | None,
    bfh_gate: str,
    bfh_fleet: int | None,
    scenario_record: Callable[[Any], None],
    bfh_rounds: int,
    record_property: Callable[[str, object], None],
    bfh_unknown: tuple[str, int],
) -> None:
    """Promise: the entry's `what`, judged by every gated checker (--bfh-rounds N: in N rounds);
    an unknown verdict runs again (--bfh-rerun-unknown), then fails as inconclusive."""
    session = _Session(reports_root, backend_kind, agent_cmd, bfh_agent_protocol, bfh_gate, bfh_fleet)
    policy, reruns = bfh_unknown
    if bfh_rounds > 1:
        return _in_rounds(entry, bfh_rounds, session, scenario_record, record_property, bfh_unknown)
    outs: list[catalog.Outcome] = []

    def attempt(k: int) -> rounds.Round:
        outs.append(session.run(entry, **({"label": f"{entry.name}-rerun{k}"} if k else {})))
        return _round(outs[-1], 0, entry.name)

    r = rounds.settle(attempt, reruns)
    out = outs[-1]
    scenario_record(out.result)
    record_property(RUN_DIRS, json.dumps([str(out.result.run_dir)]))
    _record_unknown(record_property, [r], policy)
    v = assert_verdict(out.result, f"{entry.name}: {entry.what}", policy, r.reruns)
    if v.verdict == "n/a":
        pytest.skip(f"not applicable to this agent: {v.note}")


def _round(out: catalog.Outcome, index: int, name: str, replay: str = "") -> rounds.Round:
    v = out.result.verdict
    verdict = v.verdict if v is not None else "error"
    why = v.why_unknown if v is not None and v.verdict == "unknown" else ""
    return rounds.Round(index, verdict, out.result.run_dir, replay, v.message(name) if v else "", why=why)


def _record_unknown(
    record_property: Callable[[str, object], None], rs: list[rounds.Round], policy: str
) -> None:
    """The inconclusive rounds and the re-runs, for the session's summary (plugin reporting)."""
    n = sum(r.inconclusive for r in rs)
    record_property("inconclusive", n)
    record_property("inconclusive_skipped", n if policy == "skip" else 0)
    record_property("reruns", sum(r.reruns for r in rs))


def _in_rounds(
    entry: catalog.Scenario,
    n: int,
    session: _Session,
    scenario_record: Callable[[Any], None],
    record_property: Callable[[str, object], None],
    unknown: tuple[str, int] = ("fail", rounds.RERUN_UNKNOWN),
) -> None:
    """N rounds of the entry, another seed each; failures of N and the 95 % bound as properties;
    the first failing round's run folder and replay command head the failure message. A round
    whose verdict is unknown runs again (the same seed), as a single run does."""
    results: dict[int, Any] = {}
    policy, reruns = unknown

    def one(i: int) -> rounds.Round:
        seed = entry.seed + i
        replay = rounds.replay_command(entry.name, seed, session.agent_cmd, entry.topology)

        def attempt(k: int) -> rounds.Round:
            label = f"{entry.name}-r{i + 1}" + (f"-rerun{k}" if k else "")
            out = session.run(entry, seed=seed, label=label)
            results[i] = out.result
            return _round(out, i, entry.name, replay)

        return rounds.settle(attempt, reruns)

    tally = rounds.repeat(entry_id(entry), n, one, policy)
    first = tally.first_failure
    scenario_record(results[first.index] if first else results[n - 1])
    for k, val in tally.properties():
        record_property(k, val)
    _record_unknown(record_property, tally.rounds, policy)
    record_property(RUN_DIRS, json.dumps([str(d) for d in tally.to_dict()["run_dirs"] if d]))
    print(tally.line())
    assert not tally.failures, tally.message()
    if tally.skipped:
        pytest.skip(f"{tally.line()} (--bfh-unknown=skip)")
