"""Helpers the scenarios share: run one scenario, explain a violation, read a run's logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.msglog import iter_records
from spark_analysis.policy import Policy

# Scenario verdict policy: at-least-once permits duplicates (a broker redelivers what was in flight
# across a failover, sometimes dozens), so they are reported, not limited; a publisher that resends
# what the broker already acknowledged is caught precisely by `resent_after_ack`.
SCENARIO_POLICY = Policy(max_duplicates=None)


def explain(summary: dict[str, Any], run_dir: Path, what: str) -> str:
    """An assertion message: the violated promise, the counts, examples and the run folder."""
    d = summary.get("deliveries", {})
    counts = ", ".join(f"{k}={v}" for k, v in d.items())
    reasons = json.dumps(summary.get("reasons", []))[:1500]
    return (
        f"{what}\n  verdict={summary.get('verdict')} deliveries: {counts}; "
        f"unexpected={summary.get('unexpected')}"
        f"\n  reasons: {reasons}\n  run folder: {run_dir}"
    )


def agent_records(run_dir: Path, event: str | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for log in sorted((run_dir / "agents").glob("*/messages.jsonl")):
        out += [r for r in iter_records(log) if event is None or r.get("event") == event]
    return out


def fault_records(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "faults.jsonl"
    return list(iter_records(path)) if path.exists() else []


def fault_end_ts(run_dir: Path, fault: str) -> float:
    ends = [r["ts"] for r in fault_records(run_dir) if r["event"] == "fault_end" and r["fault"] == fault]
    assert ends, f"no {fault} fault ended in {run_dir}"
    return float(ends[0])


def received_after(run_dir: Path, fault: str) -> list[dict[str, Any]]:
    """Receipts after the first window of `fault` ended (the agent recovered)."""
    end = fault_end_ts(run_dir, fault)
    return [r for r in agent_records(run_dir, "received") if r["ts"] > end]


def first_attempts(run_dir: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in agent_records(run_dir, "send_attempt"):
        out[r["msg_id"]] = min(out.get(r["msg_id"], r["ts"]), r["ts"])
    return out


def downgrades(run_dir: Path) -> list[str]:
    """Where an agent used a weaker guarantee than its workload asked for (QoS, durability)."""
    out: list[str] = []
    for wl_path in sorted((run_dir / "agents").glob("*/workload.json")):
        wl = json.loads(wl_path.read_text())
        log = wl_path.parent / "messages.jsonl"
        recs = list(iter_records(log)) if log.exists() else []
        want_pub = {p["topic"]: int(p.get("qos", 0)) for p in wl.get("publications", [])}
        want_sub = {
            x["topic"]: (int(x.get("qos", 0)), bool(x.get("durable"))) for x in wl.get("subscriptions", [])
        }
        for r in recs:
            if r.get("event") == "sent" and int(r.get("qos") or 0) < want_pub.get(r.get("topic"), 0):
                out.append(
                    f"{wl['agent']} published {r['topic']} at QoS {r.get('qos')} "
                    f"(asked {want_pub[r['topic']]})"
                )
                break
        for r in recs:
            want = want_sub.get(r.get("topic")) if r.get("event") == "subscribed" else None
            if want and (int(r.get("qos") or 0) < want[0] or (want[1] and not r.get("durable"))):
                got = f"QoS {r.get('qos')} durable={r.get('durable')}"
                asked = f"QoS {want[0]} durable={want[1]}"
                out.append(f"{wl['agent']} subscribed {r['topic']} with {got} (asked {asked})")
    return sorted(set(out))


def resent_after_ack(run_dir: Path) -> list[str]:
    """msg_ids the publisher attempted again after the broker had acknowledged them."""
    acked: dict[str, float] = {}
    for r in agent_records(run_dir, "sent"):
        acked[r["msg_id"]] = min(acked.get(r["msg_id"], r["ts"]), r["ts"])
    return sorted(
        {
            r["msg_id"]
            for r in agent_records(run_dir, "send_attempt")
            if r["msg_id"] in acked and r["ts"] > acked[r["msg_id"]]
        }
    )


def assert_no_loss(result: Any, what: str, allow_drops: bool = False, allow_duplicates: bool = True) -> None:
    """The at-least-once promise: something was acknowledged, nothing lost, unexpected or ghostly."""
    s, run_dir = result.summary, result.run_dir
    assert s is not None, f"{what}: no summary; run folder {run_dir}"
    d = s["deliveries"]
    assert s["totals"]["acknowledged"] > 0, explain(s, run_dir, f"{what}: vacuous, nothing was acknowledged")
    # the judge compares the guarantees used with the workloads in run.json (summary "downgrades")
    if "downgrades" in s:
        from spark_analysis.guarantees import describe

        weaker = [describe(x) for x in s["downgrades"]]
    else:  # a summary from before the judge checked it
        weaker = downgrades(run_dir)
    if weaker:
        missing = d.get("lost", 0) + d.get("missed", 0)
        raise AssertionError(
            explain(
                s,
                run_dir,
                f"{what}: the agent downgraded the at-least-once promise the "
                f"workload asked for ({'; '.join(weaker)}): {missing} deliveries lost",
            )
        )
    assert d["lost"] == 0, explain(s, run_dir, f"{what}: acknowledged messages were lost")
    assert s["unexpected"] == 0, explain(s, run_dir, f"{what}: messages received that were never sent")
    # in-doubt ghosts (the broker had the message when its publisher died or gave up) break no promise
    ghosts = s.get("ghosts", {})
    assert ghosts.get("timeout", 0) + ghosts.get("dropped_other", 0) == 0, explain(
        s, run_dir, f"{what}: messages the publisher reported as dropped were delivered"
    )
    if not allow_drops:
        assert s["totals"]["dropped"] == 0, explain(s, run_dir, f"{what}: the publisher dropped messages")
    if not allow_duplicates:
        assert d["duplicated"] == 0, explain(s, run_dir, f"{what}: duplicates")
    assert s["verdict"] == "pass", explain(s, run_dir, f"{what}: the verdict is fail")
    resent = resent_after_ack(run_dir)
    assert not resent, explain(
        s,
        run_dir,
        f"{what}: acknowledged messages were sent again (duplicates): {len(resent)}, e.g. {resent[:5]}",
    )
    assert not result.stalled, explain(s, run_dir, f"{what}: the agent stopped publishing (stalled)")
    assert not result.nemesis_errors, f"{what}: fault steps failed: {result.nemesis_errors}; run {run_dir}"


def _with_command(factory: Any, command: str) -> Any:
    def make(env: Any) -> Any:
        specs = factory(env)
        for spec in specs:
            spec.command = command
        return specs

    return make


def scenario_runner(reports_root: Path, backend: str, agent_cmd: str | None, record: Any) -> Any:
    """A `run(topology, schedule, label, **agent_kw)` callable for scenarios.

    `agent_cmd` (pytest --agent-cmd, or a defect agent) replaces the reference agent except where
    `own_agent=False` (negative controls of the checker); `agents=` takes a custom factory.
    """
    from harness.agents import agent_factory
    from harness.runner import execute

    def run(
        topology: Any,
        schedule: Any,
        label: str,
        own_agent: bool = True,
        policy: Any = SCENARIO_POLICY,
        agents: Any = None,
        warmup_s: float = 0.0,
        **agent_kw: Any,
    ) -> Any:
        if own_agent and agent_cmd and "command" not in agent_kw:
            agent_kw["command"] = agent_cmd
        factory = agents if agents is not None else agent_factory(**agent_kw)
        if agents is not None and own_agent and agent_cmd:
            factory = _with_command(agents, agent_cmd)
        result = execute(
            topology,
            factory,
            schedule,
            label=label,
            reports=reports_root,
            backend=backend,
            show_progress=False,
            policy=policy,
            warmup_s=warmup_s,
        )
        record(result.summary or {}, result.run_dir)
        return result

    run.agent_cmd = agent_cmd  # type: ignore[attr-defined]
    return run
