"""The reconciliation job on hand-written runs: every class, the verdict policy, robustness."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
from pandas_reference import reconcile_pandas

from harness.verdict.checks.limits import anomalies
from spark_analysis.policy import Policy, load_policy
from spark_analysis.reconcile import main, reconcile
from spark_analysis.testing.synth import Fault, History, Msg, Sub

pytestmark = pytest.mark.spark


def classes_history() -> History:
    """One or more examples of every class, with the expected status per (msg_id, subscriber)."""
    subs = [
        Sub("sub-a", "t/#", 10.0, durable=True, qos=1, resubscribes=2),  # at-least-once
        Sub("sub-b", "t/+", 10.0, durable=False, qos=0),  # best-effort
        Sub("sub-c", "t/x/#", 50.0),  # subscribes late
        Sub("sub-d", "u/a", 10.0),  # matches none of the topics below
    ]
    A, B, C, D = 0, 1, 2, 3
    msgs = [
        Msg("m-ok", "pub-1", "t/a", 1, 20.0, "acknowledged", receipts={A: [20.1], B: [20.2]}),
        Msg(
            "m-dup",
            "pub-1",
            "t/a",
            1,
            21.0,
            "acknowledged",
            attempts=2,
            receipts={A: [21.1, 21.2, 21.3], B: [21.1]},
        ),
        Msg("m-lost", "pub-1", "t/a", 1, 22.0, "acknowledged"),
        Msg("m-drop", "pub-1", "t/a", 1, 23.0, "dropped", attempts=3),
        Msg("m-ghost-t", "pub-1", "t/a", 1, 24.0, "dropped", receipts={A: [30.0]}),
        Msg("m-ghost-o", "pub-1", "t/a", 1, 25.0, "dropped", drop_reason="shutdown", receipts={A: [26.0]}),
        Msg("m-doubt", "pub-1", "t/a", 1, 26.0, "in_doubt"),
        Msg("m-doubt-g", "pub-1", "t/a", 1, 27.0, "in_doubt", receipts={B: [27.1]}),
        Msg("m-late", "pub-2", "t/x/y", 1, 40.0, "acknowledged", receipts={A: [40.1], C: [50.5]}),
        Msg("m-mis", "pub-2", "t/a", 1, 41.0, "acknowledged", receipts={A: [41.1], B: [41.1], D: [41.2]}),
        Msg("m-qos0", "pub-2", "t/a", 0, 42.0, "acknowledged"),
        Msg("m-nosub", "pub-2", "v/none", 1, 43.0, "acknowledged"),
    ]
    return History(
        run="run-classes",
        subs=subs,
        msgs=msgs,
        unexpected=[(A, "x-1", 60.0), (A, "x-1", 60.5), (B, "x-2", 61.0)],
        faults=[Fault("f-1", 21.5, 22.5), Fault("f-quiet", 1000.0, 1001.0)],
    )


EXPECTED = {
    ("m-ok", "sub-a"): "ok",
    ("m-ok", "sub-b"): "ok",
    ("m-dup", "sub-a"): "duplicated",
    ("m-dup", "sub-b"): "ok",
    ("m-lost", "sub-a"): "lost",
    ("m-lost", "sub-b"): "missed",
    ("m-drop", "sub-a"): "dropped_expected",
    ("m-drop", "sub-b"): "dropped_expected",
    ("m-ghost-t", "sub-a"): "ghost",
    ("m-ghost-t", "sub-b"): "dropped_expected",
    ("m-ghost-o", "sub-a"): "ghost",
    ("m-ghost-o", "sub-b"): "dropped_expected",
    ("m-doubt", "sub-a"): "in_doubt_missing",
    ("m-doubt", "sub-b"): "in_doubt_missing",
    ("m-doubt-g", "sub-a"): "in_doubt_missing",
    ("m-doubt-g", "sub-b"): "ghost",
    ("m-late", "sub-a"): "ok",
    ("m-late", "sub-c"): "extra",
    ("m-mis", "sub-a"): "ok",
    ("m-mis", "sub-b"): "ok",
    ("m-mis", "sub-d"): "misrouted",
    ("m-qos0", "sub-a"): "missed",
    ("m-qos0", "sub-b"): "missed",
    ("x-1", "sub-a"): "unexpected",
    ("x-2", "sub-b"): "unexpected",
}

JUNK = [
    "this is not json",
    "[1, 2, 3]",
    '{"ts": "yesterday", "run": "r", "agent": "sub-a", "event": "received", "msg_id": "q", '
    '"subscription": "t/#"}',
    '{"ts": 5.0, "run": "r", "agent": "sub-a", "event": "received", "msg_id": "q"}',
    '{"ts": 5.0, "run": "r", "agent": "sub-a", "event": "sent"}',
    '{"run": "r", "agent": "sub-a", "event": "sent", "msg_id": "q"}',
]


def robust_history() -> History:
    """Torn last line, junk lines, unknown fields and events, missing optional fields."""
    h = History(
        run="run-robust",
        subs=[Sub("sub-a", "r/#", 1.0), Sub("sub-z", "r/#", None)],  # sub-z never logged `subscribed`
        msgs=[
            Msg("r1", "pub", "r/a", 1, 2.0, "acknowledged", receipts={0: [2.1], 1: [2.2]}),
            Msg("r2", "pub", "r/a", 1, 3.0, "acknowledged", receipts={0: [3.1]}),
        ],
        junk=JUNK,
        torn_tail=True,
    )
    return h


def _build_runs(root: Path) -> list[Path]:
    classes = classes_history().write(root / "classes")
    robust = robust_history().write(root / "robust")
    # unknown event type and a record without the optional `broker`/`qos` fields
    with (robust / "agents" / "pub" / "messages.jsonl").open("r+") as fh:
        text = fh.read()
        fh.seek(0)
        extra = (
            '{"ts": 4.0, "run": "run-robust", "agent": "pub", "event": "heartbeat", "x": 1}\n'
            '{"ts": 4.5, "run": "run-robust", "agent": "pub", "event": "send_attempt", "msg_id": "r3", '
            '"topic": "r/b", "attempt": 1}\n'
        )
        fh.write(extra + text)
    empty = root / "empty"
    (empty / "agents" / "idle").mkdir(parents=True)
    (empty / "agents" / "idle" / "messages.jsonl").write_text("")
    nolog = root / "20990101-000000-nolog"
    nolog.mkdir()
    (nolog / "run.json").write_text(json.dumps({"run": "from-run-json", "seed": 1}))
    return [classes, robust, empty, nolog]


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> dict[str, tuple[Path, dict]]:
    """Four runs reconciled in one job (the job is partitioned by run).

    Read-only for the tests. Under pytest-xdist the workers share one copy (built once, under a
    file lock), so a worker that only reads it needs no Spark session of its own.
    """
    uid = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if uid:
        root = tmp_path_factory.getbasetemp().parent / f"bfh-spark-runs-{uid}"
        root.mkdir(exist_ok=True)
    else:
        root = tmp_path_factory.mktemp("runs")
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / "summaries.json"
        names = ["classes", "robust", "empty", "20990101-000000-nolog"]
        if not done.exists():
            dirs = _build_runs(root)
            # every pair in messages.parquet: the tests below read the ok pairs too
            summaries = reconcile(dirs, spark=request.getfixturevalue("spark"), all_pairs=True)
            done.write_text(json.dumps(summaries))
    summaries = json.loads(done.read_text())
    return {n: (root / n, s) for n, s in zip(names, summaries, strict=True)}


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    """A private copy of a shared run (mtimes kept, so its staged Parquet stays valid)."""
    return Path(shutil.copytree(run_dir, tmp_path / run_dir.name))


def _pairs(run_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(run_dir / "analysis" / "messages.parquet")


def test_every_class_is_classified(runs):
    run_dir, summary = runs["classes"]
    pairs = _pairs(run_dir)
    got = {
        (r.msg_id, r.subscriber): r.status
        for r in pairs.itertuples()
        if isinstance(r.status, str) and r.subscriber is not None
    }
    assert got == EXPECTED
    dup = pairs[(pairs.msg_id == "m-dup") & (pairs.subscriber == "sub-a")].iloc[0]
    assert dup.received == 3
    late = pairs[(pairs.msg_id == "m-late") & (pairs.subscriber == "sub-c")].iloc[0]
    assert not late.expected
    # a message with no matching subscription keeps one row without subscription
    nosub = pairs[pairs.msg_id == "m-nosub"]
    assert len(nosub) == 1 and nosub.iloc[0].subscription is None and nosub.iloc[0].status is None
    assert set(pairs[pairs.msg_id == "m-ok"].guarantee) == {"at-least-once", "best-effort"}

    d = summary["deliveries"]
    assert d["expected"] == 21
    classes = ("ok", "duplicated", "lost", "missed", "dropped_expected", "ghost", "in_doubt_missing")
    assert {k: d[k] for k in classes} == {
        "ok": 6,
        "duplicated": 1,
        "lost": 1,
        "missed": 3,
        "dropped_expected": 4,
        "ghost": 3,
        "in_doubt_missing": 3,
    }
    assert d["extra"] == 1 and d["misrouted"] == 1 and d["observed_only"] == 2
    assert d["duplicate_receipts"] == 2
    assert summary["totals"] == {
        "attempted": 12,
        "acknowledged": 7,
        "dropped": 3,
        "in_doubt": 2,
        "conflicting": 0,
        "records": summary["totals"]["records"],
        "receipts": 17,
    }
    assert summary["ghosts"] == {"timeout": 1, "dropped_other": 1, "in_doubt": 1}
    assert summary["unexpected"] == 2 and summary["unexpected_receipts"] == 3
    assert summary["run"] == "run-classes"


def test_policy_reasons(runs):
    """Spark counts and keeps examples; the policy's limits are the verdict's (checks/limits.py)."""
    _, s = runs["classes"]
    assert "verdict" not in s and "reasons" not in s and "warnings" not in s
    assert s["examples"]["lost"] == ["m-lost"]
    over, reported = anomalies(s)
    reasons = {r["kind"]: r for r in over}
    assert set(reasons) == {"lost", "unexpected", "ghost_timeout", "ghost_dropped_other", "misrouted"}
    assert reasons["lost"]["count"] == 1 and reasons["lost"]["examples"] == ["m-lost"]
    assert reasons["unexpected"]["count"] == 2 and reasons["unexpected"]["examples"] == ["x-1", "x-2"]
    assert reasons["ghost_timeout"]["examples"] == ["m-ghost-t"]
    warnings = {w["kind"]: w for w in reported}
    # duplicates and in-doubt ghosts are reported, not violations, under the default policy
    assert warnings["duplicated"]["examples"] == ["m-dup"]
    assert warnings["ghost_in_doubt"]["examples"] == ["m-doubt-g"]
    assert warnings["vacuous_fault"]["examples"] == ["f-quiet"]
    assert s["policy"] == Policy().to_dict()
    report = (runs["classes"][0] / "analysis" / "report.md").read_text()
    assert "policy violation" not in report and "m-lost" in report and "| lost | 1 |" in report


def test_metrics_latency_order_and_faults(runs):
    _, s = runs["classes"]
    lat = s["latency_s"]
    # first receipts of attempted messages, nearest-rank percentiles
    assert lat["count"] == 12 and lat["max"] == pytest.approx(10.5)  # m-late on sub-c: 50.5 - 40.0
    assert lat["p50"] == pytest.approx(0.1)
    # quarter-decade bins: 10.5 s is bin 4 ([10^1, 10^1.25)), 0.1 s bin -4
    assert sum(n for _, n in lat["histogram"]) == 12 and max(b for b, _ in lat["histogram"]) == 4
    assert dict(lat["histogram"])[-4] >= 1
    streams = {(x["subscriber"], x["publisher"]): x for x in s["out_of_order"]["streams"]}
    # sub-a receives m-ghost-t (sent at 24) at 30.0, after m-ghost-o (sent at 25, received 26.0)
    assert streams[("sub-a", "pub-1")]["out_of_order"] == 1
    assert streams[("sub-a", "pub-1")]["examples"] == ["m-ghost-t"]
    f1, quiet = s["faults"]
    assert f1["fault_id"] == "f-1" and f1["window"] == [21.5, 32.5] and not f1["vacuous"]
    assert {k: v["count"] for k, v in f1["anomalies"].items()} == {
        "lost": 1,
        "missed": 1,
        "dropped_expected": 4,
        "ghost": 3,
        "in_doubt_missing": 3,
    }
    assert f1["anomalies"]["lost"]["examples"] == ["m-lost"]
    # examples are distinct messages: m-drop and m-doubt miss both subscriptions, listed once
    assert f1["anomalies"]["dropped_expected"]["examples"] == ["m-drop", "m-ghost-o", "m-ghost-t"]
    assert f1["anomalies"]["in_doubt_missing"]["examples"] == ["m-doubt", "m-doubt-g"]
    assert s["examples"]["in_doubt_missing"] == ["m-doubt", "m-doubt-g"]
    assert f1["recovery_s"]["pub-1"]["publisher"] == pytest.approx(0.01)  # m-dup's ack after its retry
    assert f1["recovery_s"]["sub-a"]["subscriber:t/#"] == pytest.approx(26.0 - 21.5)
    assert f1["recovery_s"]["sub-d"]["subscriber:u/a"] == pytest.approx(41.2 - 21.5)
    assert quiet["vacuous"] and quiet["acknowledged_in_window"] == 0 and quiet["anomaly_count"] == 0


def test_small_blocks_and_horizon_change_nothing(runs, spark, tmp_path, monkeypatch):
    """Streams cut into out-of-order blocks of 2 log positions, and recoveries looked for only 1 s
    after a window (later ones by the late-recovery scan), give the same summary."""
    run_dir, s = runs["classes"]
    monkeypatch.setenv("BFH_OOO_BLOCK_SEQS", "2")
    monkeypatch.setenv("BFH_RECOVERY_HORIZON_S", "1")
    (small,) = reconcile([_copy(run_dir, tmp_path)], spark=spark)
    assert small["out_of_order"] == s["out_of_order"]
    assert any(x["out_of_order"] for x in s["out_of_order"]["streams"])
    assert small["faults"] == s["faults"]
    # sub-d first receives 8.7 s after the window [21.5, 32.5]: found by the late scan
    assert s["faults"][0]["recovery_s"]["sub-d"]["subscriber:u/a"] == pytest.approx(41.2 - 21.5)


def test_default_table_lists_every_pair_that_is_not_a_plain_delivery(runs, spark, tmp_path):
    """By default messages.parquet holds the pairs whose status is not ok and the first row of
    every message not acknowledged: exactly those rows of the full table; the summary is the same."""
    run_dir, full_summary = runs["classes"]
    (s,) = reconcile([_copy(run_dir, tmp_path)], spark=spark)
    assert s["engine"]["messages_parquet"] == "listed"
    assert full_summary["engine"]["messages_parquet"] == "all"
    assert {k: v for k, v in s.items() if k not in ("engine", "run_dir")} == {
        k: v for k, v in full_summary.items() if k not in ("engine", "run_dir")
    }
    full = _pairs(run_dir)
    keep = (full.status.notna() & (full.status != "ok")) | (full.msg_row & (full.state != "acknowledged"))
    assert 0 < keep.sum() < len(full)

    def rows(df: pd.DataFrame) -> list[tuple]:
        return sorted(df.astype(object).where(df.notna(), None).itertuples(index=False, name=None), key=repr)

    got = _pairs(tmp_path / run_dir.name)
    assert list(got.columns) == list(full.columns)
    assert rows(got) == rows(full[keep])
    # `reached`: m-lost was delivered to no subscription, m-dup (duplicated on one) was
    assert not got[got.msg_id == "m-lost"].reached.any()
    assert full[full.msg_id == "m-dup"].reached.all()


def test_robustness_malformed_torn_unknown(runs):
    run_dir, s = runs["robust"]
    m = s["malformed"]
    assert m["count"] == len(JUNK) + 1  # + the torn last line
    assert m["by_reason"] == {
        "bad_type": 1,
        "missing_msg_id": 1,
        "missing_subscription": 1,
        "missing_ts": 1,
        "unparseable": 3,
    }
    assert len(m["examples"]) == 5 and all(e["file"].startswith("agents/") for e in m["examples"])
    assert s["ignored_records"] == 1  # the unknown `heartbeat` event
    # r3 has no qos (optional field missing): attempted, in doubt, best effort
    assert s["totals"]["attempted"] == 3 and s["totals"]["in_doubt"] == 1
    pairs = _pairs(run_dir)
    r3 = pairs[(pairs.msg_id == "r3") & (pairs.subscriber == "sub-a")].iloc[0]
    assert r3.status == "in_doubt_missing" and r3.guarantee == "best-effort"
    # sub-z never logged `subscribed`: its receipt is observed but was not expected
    z = pairs[(pairs.msg_id == "r1") & (pairs.subscriber == "sub-z")].iloc[0]
    assert z.status == "extra" and not z.expected
    assert s["deliveries"]["ok"] == 2 and s["deliveries"]["lost"] == 0
    over, reported = anomalies(s)
    assert over == []  # malformed records are reported, not a violation by default
    assert any(w["kind"] == "malformed" for w in reported)


def test_empty_runs_and_run_id_fallback(runs):
    for name in ("empty", "20990101-000000-nolog"):
        run_dir, s = runs[name]
        assert anomalies(s) == ([], [])
        assert s["totals"]["attempted"] == 0 and s["deliveries"]["expected"] == 0 and s["unexpected"] == 0
        assert s["latency_s"]["p50"] is None
        assert json.loads((run_dir / "analysis" / "summary.json").read_text()) == s
        assert (run_dir / "analysis" / "messages.parquet").is_dir()
        assert (run_dir / "analysis" / "report.md").exists()
    assert runs["empty"][1]["run"] == "empty"  # no run.json, no records: the folder name
    assert runs["20990101-000000-nolog"][1]["run"] == "from-run-json"
    assert runs["robust"][1]["run"] == "run-robust"  # the records' `run`


def test_facts_kept_at_staging_match_a_fresh_scan(runs, spark, tmp_path):
    """The facts kept in the manifest at staging give the summary a scan of the events gives: a
    run staged before facts were kept, and a policy asking for more malformed examples than kept."""
    run_dir, s = runs["robust"]
    manifest = json.loads((run_dir / "analysis" / "events.manifest.json").read_text())
    assert manifest["facts"]["cube"] and manifest["facts"]["malformed"]
    old = _copy(run_dir, tmp_path / "old")
    path = old / "analysis" / "events.manifest.json"
    path.write_text(json.dumps({k: v for k, v in manifest.items() if k != "facts"}))
    (again,) = reconcile([old], spark=spark)
    assert "facts" not in json.loads(path.read_text())  # still fresh: not staged again

    def same(x: dict) -> dict:
        return {k: v for k, v in x.items() if k not in ("engine", "run_dir")}

    assert same(again) == same(s)
    assert again["malformed"]["count"] > 0
    many = _copy(run_dir, tmp_path / "many")
    (more,) = reconcile([many], spark=spark, policy=Policy(examples=50))
    # all 7 kept at staging (fewer than 20): every one is an example, in file order
    assert len(more["malformed"]["examples"]) == more["malformed"]["count"] == 7
    assert more["malformed"]["examples"][:5] == again["malformed"]["examples"]


def test_policy_thresholds_and_staging_reuse(runs, spark, tmp_path):
    run_dir = _copy(runs["classes"][0], tmp_path)
    events = run_dir / "analysis" / "events.parquet"
    staged_mtime = events.stat().st_mtime_ns
    policy_file = tmp_path / "policy.json"
    policy_file.write_text(
        json.dumps(
            {"max_duplicates": 0, "max_ghost_dropped_other": None, "max_misrouted": 5, "max_unexpected": 2}
        )
    )
    policy = load_policy(policy_file, settle_s=0.5)
    (s,) = reconcile([run_dir], policy=policy, spark=spark)
    assert events.stat().st_mtime_ns == staged_mtime  # staged Parquet reused, not re-parsed
    assert {r["kind"] for r in anomalies(s)[0]} == {"lost", "ghost_timeout", "duplicated"}
    assert s["policy"]["max_duplicates"] == 0 and s["policy"]["settle_s"] == 0.5
    f1 = s["faults"][0]
    assert f1["window"] == [21.5, 23.0]
    assert {k: v["count"] for k, v in f1["anomalies"].items()} == {
        "lost": 1,
        "missed": 1,
        "dropped_expected": 2,
    }
    # a changed log is staged again
    log = run_dir / "agents" / "sub-a" / "messages.jsonl"
    with log.open("a") as fh:
        fh.write(
            '{"ts": 70.0, "run": "run-classes", "agent": "sub-a", "event": "received", "msg_id": "m-lost", '
            '"topic": "t/a", "subscription": "t/#"}\n'
        )
    os.utime(log, ns=(staged_mtime + 10**9, staged_mtime + 10**9))
    (s2,) = reconcile([run_dir], spark=spark)
    assert s2["deliveries"]["lost"] == 0 and s2["deliveries"]["ok"] == 7
    assert events.stat().st_mtime_ns != staged_mtime


def test_drop_handed_to_broker_then_delivered_is_in_doubt_not_a_violation(spark, tmp_path):
    """A publisher that dropped a message after writing it to a broker that died before the ack
    cannot know its fate: a later delivery is an in-doubt ghost (reported), while a delivered drop
    that was never handed to any broker stays a ghost-through-timeout (a violation)."""
    h = History(
        run="run-handed",
        subs=[Sub("sub-a", "t/#", 1.0)],
        msgs=[
            Msg("h-1", "pub", "t/a", 1, 2.0, "dropped", handed=True, receipts={0: [9.0]}),
            Msg("h-2", "pub", "t/a", 1, 3.0, "dropped", handed=False, receipts={0: [9.5]}),
            Msg("h-3", "pub", "t/a", 1, 4.0, "dropped", handed=True),
        ],
    )
    (s,) = reconcile([h.write(tmp_path / "handed")], spark=spark)
    assert s["ghosts"] == {"timeout": 1, "dropped_other": 0, "in_doubt": 1}
    assert s["deliveries"]["ghost"] == 2 and s["deliveries"]["dropped_expected"] == 1
    over, reported = anomalies(s)
    reasons = {r["kind"]: r for r in over}
    assert set(reasons) == {"ghost_timeout"} and reasons["ghost_timeout"]["examples"] == ["h-2"]
    assert {w["kind"]: w for w in reported}["ghost_in_doubt"]["examples"] == ["h-1"]
    # the generator's ground truth and the pandas reference say the same
    assert h.truth()["ghosts"] == s["ghosts"]
    assert reconcile_pandas(tmp_path / "handed")["ghosts"] == s["ghosts"]


def _agent(name: str, pubs: list[tuple[str, int]], subs: list[tuple[str, int, bool]]) -> dict:
    return {
        "name": name,
        "workload": {
            "publications": [{"topic": t, "qos": q, "count": 1} for t, q in pubs],
            "subscriptions": [{"topic": t, "qos": q, "durable": d} for t, q, d in subs],
        },
    }


def test_downgraded_guarantee_is_a_violation(spark, tmp_path):
    """The workloads in run.json demand QoS 1 and durable subscriptions: an agent that published
    at QoS 0 or resubscribed non-durably fails the run even though nothing was lost."""
    h = History(
        run="run-downgrade",
        subs=[Sub("sub-a", "t/#", 1.0, durable=False), Sub("sub-b", "t/a", 1.0, qos=1)],
        msgs=[
            Msg("d-1", "pub", "t/a", 1, 2.0, "acknowledged", receipts={0: [2.5], 1: [2.6]}),
            Msg("d-2", "pub", "t/b", 0, 3.0, "acknowledged", receipts={0: [3.5]}),
        ],
    )
    run_dir = h.write(tmp_path / "downgrade")
    agents = [
        _agent("pub", [("t/a", 1), ("t/b", 1)], []),
        _agent("sub-a", [], [("t/#", 1, True)]),
        _agent("sub-b", [], [("t/a", 1, True)]),  # honoured
    ]
    (run_dir / "run.json").write_text(json.dumps({"run": "run-downgrade", "agents": agents}))
    honoured = Msg("d-1", "pub", "t/a", 1, 2.0, "acknowledged", receipts={0: [2.6]})
    ok_dir = History("run-honoured", h.subs[1:], [honoured]).write(tmp_path / "honoured")
    (ok_dir / "run.json").write_text(json.dumps({"run": "run-honoured", "agents": agents}))
    bare_dir = h.write(tmp_path / "no-run-json")  # nothing demanded: nothing to check
    s, ok, bare = reconcile([run_dir, ok_dir, bare_dir], spark=spark)
    assert s["deliveries"]["lost"] == 0 and anomalies(s)[0]
    assert [(d["agent"], d["kind"], d["topic"]) for d in s["downgrades"]] == [
        ("pub", "publish", "t/b"),
        ("sub-a", "subscribe", "t/#"),
    ]
    assert s["downgrades"][1]["got"] == {"qos": 1, "durable": False}
    (reason,) = anomalies(s)[0]
    assert reason["kind"] == "downgraded" and reason["count"] == 2
    assert reason["examples"][0] == "pub published t/b at QoS 0 (asked 1)"
    assert ok["downgrades"] == [] and anomalies(ok)[0] == []
    assert bare["downgrades"] == [] and anomalies(bare)[0] == []
    # a policy can make it a warning
    (w,) = reconcile([run_dir], spark=spark, policy=Policy(max_downgrades=None))
    assert anomalies(w)[0] == [] and {x["kind"] for x in anomalies(w)[1]} >= {"downgraded"}


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert main([str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "run directory not found" in err[0]
    assert main([]) == 2
    assert main(["--bogus"]) == 2
    bad_policy = tmp_path / "p.json"
    bad_policy.write_text('{"max_lots": 1}')
    assert main(["--run-dir", str(tmp_path), "--policy", str(bad_policy)]) == 2
    assert "unknown policy key" in capsys.readouterr().err
    assert main(["--run-dir", str(tmp_path), "--settle-s", "-1"]) == 2


def test_cli_runs_the_job(runs, spark, capsys, tmp_path):
    run_dir = _copy(runs["robust"][0], tmp_path)
    assert main([str(run_dir), "--max-duplicates", "3", "--settle-s", "2"]) == 0
    out = capsys.readouterr().out
    assert "run-robust: reconciled" in out and "anomaly kinds: extra, in_doubt_missing" in out
    s = json.loads((run_dir / "analysis" / "summary.json").read_text())
    assert s["policy"]["max_duplicates"] == 3 and s["policy"]["settle_s"] == 2.0
    assert s["engine"]["messages_parquet"] == "listed"
    assert not (_pairs(run_dir).status == "ok").any()
    assert main([str(run_dir), "--all-pairs", "--quiet"]) == 0
    again = json.loads((run_dir / "analysis" / "summary.json").read_text())
    assert again["engine"]["messages_parquet"] == "all"
    assert (_pairs(run_dir).status == "ok").sum() == again["deliveries"]["ok"] > 0


def test_records_of_another_run_are_counted_never_classified(spark, tmp_path):
    """A log that also holds records of another run (a reused folder, a copied log): those records
    are counted in `foreign_records` and left out of every class, so the summary's counts are this
    run's alone and agree with the verdict's evidence check, which names them."""
    h = History(
        run="run-mine",
        subs=[Sub("sub-a", "t/#", 1.0)],
        msgs=[
            Msg(f"m-{i}", "pub", "t/a", 1, 2.0 + i, "acknowledged", receipts={0: [2.5 + i]}) for i in range(3)
        ],
    )
    clean = h.write(tmp_path / "clean")
    (clean / "run.json").write_text(json.dumps({"run": "run-mine"}))
    (want,) = reconcile([clean], spark=spark)
    mixed = h.write(tmp_path / "mixed")
    (mixed / "run.json").write_text(json.dumps({"run": "run-mine"}))
    other = [
        {
            "ts": 3.0,
            "run": "run-other",
            "agent": "pub",
            "event": "sent",
            "msg_id": "x-1",
            "topic": "t/a",
            "qos": 1,
        },
        {
            "ts": 3.1,
            "run": "run-other",
            "agent": "sub-a",
            "event": "received",
            "msg_id": "x-1",
            "topic": "t/a",
            "subscription": "t/#",
            "qos": 1,
        },
        {
            "ts": 3.2,
            "run": "run-other",
            "agent": "sub-a",
            "event": "received",
            "msg_id": "m-0",
            "topic": "t/a",
            "subscription": "t/#",
            "qos": 1,
        },
    ]
    with (mixed / "agents" / "sub-a" / "messages.jsonl").open("a") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in other)
    (s,) = reconcile([mixed], spark=spark)
    assert s["foreign_records"] == {"count": 3, "runs": {"run-other": 3}}
    assert want["foreign_records"] == {"count": 0, "runs": {}}
    for key in ("deliveries", "ghosts", "unexpected", "unexpected_receipts", "malformed"):
        assert s[key] == want[key], key
    assert s["totals"] == {**want["totals"], "records": want["totals"]["records"] + 3}
    # the same logs under another run id: staged again, and now the other records are this run's
    (mixed / "run.json").write_text(json.dumps({"run": "run-other"}))
    (s2,) = reconcile([mixed], spark=spark)
    assert s2["run"] == "run-other"
    assert s2["foreign_records"] == {
        "count": want["totals"]["records"],
        "runs": {"run-mine": want["totals"]["records"]},
    }
    assert s2["totals"]["receipts"] == 2 and s2["totals"]["acknowledged"] == 1
