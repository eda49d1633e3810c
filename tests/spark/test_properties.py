"""Property tests: generated histories with known ground truth, the Spark job and the pandas
reference must all agree exactly.

Every Hypothesis example is a *batch* of histories reconciled in one Spark job (the job is
partitioned by run), so the suite stays fast while covering many histories.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pandas_reference import reconcile_pandas

from harness.verdict.checks.limits import anomalies
from spark_analysis.mqtt import matches
from spark_analysis.reconcile import reconcile
from spark_analysis.testing.synth import Fault, History, Msg, Sub, mqtt_match

pytestmark = pytest.mark.spark

FILTERS = ["t/#", "t/+", "t/a", "+/a", "#", "t/+/x", "u/#", "+", "t/a/#", "+/+/+"]
TOPICS = ["t/a", "t/b", "t/a/x", "u/a", "t", "$SYS/a", "t//x", "a"]
AGENTS = ["sub-1", "sub-2", "sub-3"]
JUNK = [
    "garbage",
    "{}",
    '{"ts": 1.0, "agent": "x", "event": "received", "msg_id": "z"}',
    '{"ts": "x", "event": "sent"}',
]


@st.composite
def histories(draw: st.DrawFn, run: str) -> History:
    n_subs = draw(st.integers(0, 4))
    subs = []
    seen = set()
    for _ in range(n_subs):
        agent, filt = draw(st.sampled_from(AGENTS)), draw(st.sampled_from(FILTERS))
        if (agent, filt) in seen:
            continue
        seen.add((agent, filt))
        when = draw(st.sampled_from([0.5, 0.5, 0.5, 15.0, 30.0, None]))  # early, late, never logged
        subs.append(
            Sub(
                agent,
                filt,
                when,
                durable=draw(st.booleans()),
                qos=draw(st.sampled_from([0, 1, 1])),
                resubscribes=draw(st.integers(0, 2)),
            )
        )
    msgs = []
    n_msgs = draw(st.integers(0, 25))
    ts = 1.0
    for i in range(n_msgs):
        ts += draw(st.sampled_from([0.25, 1.0, 2.5]))
        fate = draw(st.sampled_from(["acknowledged"] * 4 + ["dropped", "in_doubt"]))
        receipts: dict[int, list[float]] = {}
        for si in range(len(subs)):
            # receipts: mostly once, sometimes lost, duplicated or late (reordered)
            n = draw(st.sampled_from([1, 1, 1, 0, 2, 3]))
            delay = draw(st.sampled_from([0.1, 0.1, 0.3, 4.0]))
            receipts[si] = [ts + delay + 0.01 * k for k in range(n)]
        topic = draw(st.sampled_from(TOPICS))
        # a receipt is kept for a non-matching filter only sometimes (misrouted)
        for si, s in enumerate(subs):
            if not mqtt_match(s.filter, topic) and draw(st.integers(0, 9)) > 0:
                receipts[si] = []
        msgs.append(
            Msg(
                f"m{i:03d}",
                draw(st.sampled_from(["pub-1", "pub-2"])),
                topic,
                draw(st.sampled_from([0, 1, 1, 2])),
                ts,
                fate,
                attempts=draw(st.integers(1, 3)),
                drop_reason=draw(st.sampled_from(["publisher_timeout", "shutdown"])),
                handed=draw(st.booleans()),
                receipts={k: v for k, v in receipts.items() if v},
            )
        )
    unexpected = []
    if subs:
        for k in range(draw(st.integers(0, 2))):
            unexpected.append((draw(st.integers(0, len(subs) - 1)), f"x{k}", ts + 1.0 + k))
    faults = []
    for k in range(draw(st.integers(0, 2))):
        start = draw(st.sampled_from([2.0, 5.0, 12.0, 40.0]))
        end = draw(st.sampled_from([start + 1.0, start + 3.0, None]))
        faults.append(Fault(f"f{k}", start, end))
    junk = draw(st.lists(st.sampled_from(JUNK), max_size=2))
    return History(run, subs, msgs, unexpected, faults, junk=junk, torn_tail=draw(st.booleans()))


BATCH = 12


@st.composite
def batches(draw: st.DrawFn) -> list[History]:
    return [draw(histories(f"h{i:02d}")) for i in range(BATCH)]


def _check(h: History, run_dir: Path, s: dict) -> None:
    truth = h.truth()
    # 1. ground truth of the generator
    for key in ("attempted", "acknowledged", "dropped", "in_doubt"):
        assert s["totals"][key] == truth["totals"][key], key
    assert {k: s["deliveries"][k] for k in truth["deliveries"]} == truth["deliveries"]
    assert s["ghosts"] == truth["ghosts"]
    assert s["unexpected"] == truth["unexpected"]
    assert s["malformed"]["count"] == truth["malformed"]
    # 2. the pandas reference, on the same staged records
    ref = reconcile_pandas(run_dir)
    assert {k: s["deliveries"][k] for k in ref["deliveries"]} == ref["deliveries"]
    assert s["ghosts"] == ref["ghosts"]
    assert s["unexpected"] == ref["unexpected"]
    for key in ("p50", "p95", "p99", "max"):
        assert s["latency_s"][key] == pytest.approx(ref["latency_s"][key], abs=1e-9)
    assert s["latency_s"]["count"] == ref["latency_s"]["count"]
    ooo = {
        (x["subscriber"], x["subscription"], x["publisher"]): x["out_of_order"]
        for x in s["out_of_order"]["streams"]
    }
    assert ooo == ref["out_of_order"]
    assert len(s["faults"]) == len(ref["faults"])
    for fs, fr in zip(s["faults"], ref["faults"], strict=True):
        assert fs["fault_id"] == fr["fault_id"]
        assert fs["window"] == pytest.approx(fr["window"])
        assert {k: v["count"] for k, v in fs["anomalies"].items()} == fr["anomalies"]
        assert fs["acknowledged_in_window"] == fr["acknowledged_in_window"]
        assert fs["received_in_window"] == fr["received_in_window"]
        assert fs["vacuous"] == fr["vacuous"]
        flat_s = {(a, r): v for a, roles in fs["recovery_s"].items() for r, v in roles.items()}
        flat_r = {(a, r): v for a, roles in fr["recovery_s"].items() for r, v in roles.items()}
        assert flat_s.keys() == flat_r.keys()
        for k, v in flat_r.items():
            assert (flat_s[k] is None) == (v is None) and (
                v is None or flat_s[k] == pytest.approx(v, abs=1e-5)
            )
    # 3. per pair: the rows of messages.parquet and the reference's pairs
    import pandas as pd

    rows = pd.read_parquet(run_dir / "analysis" / "messages.parquet")
    # (the default table lists the pairs that are not ok; the ok ones are counted above)
    got = sorted(
        (r.msg_id, r.subscriber, r.subscription, r.status, int(r.received))
        for r in rows.itertuples()
        if isinstance(r.status, str)
    )
    want = sorted(
        (r.msg_id, r.sub_agent, r.filter, r.status, int(r.received))
        for r in ref["pairs"].itertuples()
        if r.status != "ok"
    )
    assert got == want
    # 4. policy: violated exactly on lost / unexpected / ghost-through-timeout / other-drop ghosts / misrouted
    must_fail = (
        truth["deliveries"]["lost"]
        + truth["unexpected"]
        + truth["ghosts"]["timeout"]
        + truth["ghosts"]["dropped_other"]
        + truth["deliveries"]["misrouted"]
    ) > 0
    assert bool(anomalies(s)[0]) == must_fail


@pytest.mark.parametrize("plan", ["wide", pytest.param("rows", marks=pytest.mark.extended)])
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(batch=batches())
def test_generated_histories_match_truth_and_reference(spark, batch, plan):
    root = Path(tempfile.mkdtemp(prefix="bfh-prop-"))
    # out-of-order blocks of 3 log positions: every stream spans several blocks, so the block
    # prefix maxima are checked against the reference's plain running max; a 1 s recovery horizon
    # sends most recoveries after a window through the late-recovery scan. `rows`: the pairs
    # plan of runs with many subscriptions (a fleet's, spark_analysis/pairs.py) on these runs
    knobs = {"BFH_OOO_BLOCK_SEQS": "3", "BFH_RECOVERY_HORIZON_S": "1"}
    knobs["BFH_WIDE_PAIRS_MAX_SUBS"] = "16" if plan == "wide" else "-1"
    saved = {k: os.environ.get(k) for k in knobs}
    os.environ.update(knobs)
    try:
        dirs = [h.write(root / h.run) for h in batch]
        summaries = reconcile(dirs, spark=spark)
        assert {s["engine"]["pairs"] for s in summaries} == {plan}
        for h, d, s in zip(batch, dirs, summaries, strict=True):
            _check(h, d, s)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v
        shutil.rmtree(root, ignore_errors=True)


@settings(max_examples=50, deadline=None, derandomize=True)
@given(
    data=st.lists(
        st.tuples(
            st.lists(st.sampled_from(["a", "b", "+", "#", "", "$x"]), min_size=1, max_size=4).map("/".join),
            st.lists(st.sampled_from(["a", "b", "", "$x", "c"]), min_size=1, max_size=4).map("/".join),
        ),
        min_size=1,
        max_size=300,
    )
)
def test_mqtt_filter_matching(data):
    for f, t in data:
        # where '#' is only ever the last level (valid MQTT filters), the regex twin agrees
        if "#" not in f.split("/")[:-1]:
            assert matches(f, t) == mqtt_match(f, t), (f, t)


@pytest.mark.parametrize(
    ("topic_filter", "topic", "expected"),
    [
        ("a/#", "a", True),  # '#' matches the parent level too
        ("a/#", "a/b/c", True),
        ("a/+", "a/", True),  # empty levels count
        ("a/+", "a", False),
        ("+/+", "/a", True),
        ("+", "$x", False),  # a leading wildcard never matches a '$' topic
        ("#", "$SYS/x", False),
        ("$SYS/#", "$SYS/x", True),
        ("a/b", "a/b/c", False),
    ],
)
def test_mqtt_filter_matching_cases(topic_filter, topic, expected):
    assert matches(topic_filter, topic) is expected
