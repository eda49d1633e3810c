"""The broker's account (harness/account) on real brokers: it accounts for every message the agent
logged, and the blame it decides names agents that the inference from their own logs let pass.

- the reference agent through a kill -9 of the master (and over STOMP's client acks): every `sent`
  has the broker's arrival, every `received` a dispatch to that subscription's client id and its
  ack, on the member that served it; the run passes;
- `swallows_messages` (acked, never logged), `silent_listener_death` (its connection expired by the
  broker, nothing logged) and `claims_durable` (logs `durable: true`, connects clean) each fail the
  default agent gate, blamed on the agent, every blamed row citing the broker's records.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness.catalog import scenarios as catalog
from harness.contracts import brokeraccount as ba
from harness.verdict import judge
from harness.verdict.blame import read as blame_rows
from scenarios.support import agent_records, fault_windows, run_defect

pytestmark = [pytest.mark.verdict_power, pytest.mark.broker, pytest.mark.spark, pytest.mark.timeout(900)]


def _account(run_dir: Path) -> list[dict[str, Any]]:
    return list(ba.read(run_dir))


#: a kill -9 takes the killed member's unwritten records with it (its writer flushes every 20 ms,
#: later under load): what the agent logged this close to a kill may have no record (the verdict
#: reads it as a gap, harness/verdict/fromaccount.py `_killed_near`)
KILL_GAP_S = (0.5, 0.5)


def _near_a_kill(run_dir: Path) -> Any:
    kills = [w.start for w in fault_windows(run_dir, "kill")]
    return lambda r: any(k - KILL_GAP_S[0] <= float(r["ts"]) <= k + KILL_GAP_S[1] for k in kills)


def _every_message_accounted(run_dir: Path) -> Counter[str]:
    """Assert the account holds an arrival of every `sent` and a dispatch and an ack (to a consumer
    of the receiving subscription's client id) of every `received`, but for those logged just
    beside a kill -9 (fewer than a quarter of them); the members that served."""
    acc = _account(run_dir)
    assert acc, f"no broker account in {run_dir}"
    near_kill = _near_a_kill(run_dir)
    arrived = {r["msg_id"] for r in acc if r["event"] == ba.ARRIVED}
    sends = agent_records(run_dir, "sent")
    sent = {r["msg_id"] for r in sends if not near_kill(r)}
    assert len(sent) > 0.75 * len(sends), f"{len(sends) - len(sent)} of {len(sends)} sends beside a kill"
    assert sent and sent <= arrived, f"sent, never arrived at a broker: {sorted(sent - arrived)[:5]}"
    consumers = {(r["broker"], r["cid"]): r for r in acc if r["event"] == ba.CONSUMER_ADDED}
    acked = {
        (r["msg_id"], str(consumers[(r["broker"], r["cid"])]["client_id"]))
        for r in acc
        if r["event"] == ba.ACKED and (r["broker"], r["cid"]) in consumers
    }
    dispatched = {
        (r["msg_id"], str(consumers[(r["broker"], r["cid"])]["client_id"])): r["broker"]
        for r in acc
        if r["event"] == ba.DISPATCHED and (r["broker"], r["cid"]) in consumers
    }
    served: Counter[str] = Counter()
    receipts = agent_records(run_dir, "received")
    kept = [r for r in receipts if not near_kill(r)]
    assert len(kept) > 0.75 * len(receipts), f"{len(receipts) - len(kept)} of {len(receipts)} beside a kill"
    for r in kept:
        index = str(r["subscription"])
        mine = {cid for (m, cid) in dispatched if m == r["msg_id"] and cid.endswith(_suffix(run_dir, index))}
        assert mine, f"received {r['msg_id']} on {index}: the broker never dispatched it to that subscription"
        assert any((r["msg_id"], c) in acked for c in mine), f"{r['msg_id']} received, never acked"
        served[dispatched[(r["msg_id"], next(iter(mine)))]] += 1
    return served


def _suffix(run_dir: Path, topic: str) -> str:
    """The contract's client id ends in `-s<index>` (the subscription's place in the workload)."""
    run = json.loads((run_dir / "run.json").read_text())
    subs = [s["topic"] for s in run["agents"][0]["workload"]["subscriptions"]]
    return f"-s{subs.index(topic)}"


def test_reference_through_a_kill_is_accounted_for_on_both_members(
    reports_root, backend_kind, scenario_record
):
    sc = catalog.SCENARIOS["masterslave"]
    out = catalog.run(sc, catalog.topology_named(sc.topology), reports=reports_root, backend=backend_kind,
                      show_progress=False, label="account-masterslave")  # fmt: skip
    scenario_record(out.result)
    res = out.result
    assert res.verdict is not None and res.verdict.verdict == "pass", res.verdict and res.verdict.message()
    served = _every_message_accounted(res.run_dir)
    assert len(served) == 2, f"deliveries by member {dict(served)}: the slave never served after the kill"
    gaps = ba.gaps(res.run_dir)
    assert gaps == {"unavailable": {}, "dropped": []}, gaps


@pytest.mark.extended  # STOMP's cumulative client acks, expanded per message by the plugin
def test_stomp_client_acks_are_accounted_per_message(reports_root, backend_kind, scenario_record):
    sc = catalog.SCENARIOS["stomp-kill"]
    out = catalog.run(sc, catalog.topology_named(sc.topology), reports=reports_root, backend=backend_kind,
                      show_progress=False, label="account-stomp")  # fmt: skip
    scenario_record(out.result)
    assert out.result.verdict is not None
    assert sum(_every_message_accounted(out.result.run_dir).values()) > 0


def _blamed_on_agent(res: Any, hops: set[str]) -> list[dict[str, Any]]:
    gate = judge(res.run_dir, gate="agent")  # the default of an agent command
    assert gate.verdict == "fail", gate.message()
    rows = [r for r in blame_rows(res.run_dir) if r["status"] == "lost"]
    assert rows, f"nothing lost: {res.run_dir}"
    assert {r["blame"] for r in rows} == {"agent"}, Counter(r["blame"] for r in rows)
    assert {r["source"] for r in rows} == {"account"}
    assert {r["hop"] for r in rows} <= hops, Counter(r["hop"] for r in rows)
    for r in rows:
        assert any(e.startswith("[account ") for e in r["evidence"]), r["evidence"]
    assert "at_least_once" in gate.broken, gate.message()
    return rows


def test_a_handler_that_swallows_messages_fails_the_agent_gate(reports_root, backend_kind, scenario_record):
    res = run_defect(catalog.SCENARIOS["baseline"], "swallows_messages", reports_root, backend_kind,
                     scenario_record, "account-swallows")  # fmt: skip
    rows = _blamed_on_agent(res, {"acked"})
    for r in rows:  # the dispatch and the client's ack of it, as the broker recorded them
        assert any(" dispatched]" in e for e in r["evidence"]) and any(" acked]" in e for e in r["evidence"])


def test_a_listener_that_dies_silently_fails_the_agent_gate(reports_root, backend_kind, scenario_record):
    res = run_defect(catalog.SCENARIOS["baseline"], "silent_listener_death", reports_root, backend_kind,
                     scenario_record, "account-silent")  # fmt: skip
    rows = _blamed_on_agent(res, {"not_acked", "not_dispatched"})
    assert any("logged no loss" in e for r in rows for e in r["evidence"]), rows[:2]


def test_a_client_that_claims_durable_and_connects_clean_fails(reports_root, backend_kind, scenario_record):
    res = run_defect(catalog.SCENARIOS["one-connection-cut"], "claims_durable", reports_root, backend_kind,
                     scenario_record, "account-claims-durable")  # fmt: skip
    gate = judge(res.run_dir, gate="agent")
    c = gate.check("no_downgrade")
    assert c.status == "fail" and "no_downgrade" in gate.broken, gate.message()
    assert "the broker's" in c.detail and "consumer(s)" in c.detail, c.detail
    lost = [r for r in blame_rows(res.run_dir) if r["status"] == "lost"]
    assert all(r["blame"] == "agent" for r in lost), Counter(r["blame"] for r in lost)
