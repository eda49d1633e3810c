"""The pandas reference on its own (no Spark): a small staged run written by hand, every status
once or more, with its classification worked out from docs/reconciliation.md; and a run with no
staged records."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pandas_reference import reconcile_pandas

SCHEMA = pa.schema(
    [
        ("event", pa.string()),
        ("ts", pa.float64()),
        ("seq", pa.int64()),
        ("agent", pa.string()),
        ("msg_id", pa.string()),
        ("topic", pa.string()),
        ("subscription", pa.string()),
        ("qos", pa.int32()),
        ("durable", pa.bool_()),
        ("reason", pa.string()),
        ("handed_to_broker", pa.bool_()),
    ]
)


def _stage(run_dir: Path, records: list[dict], faults: list[dict]) -> Path:
    out = run_dir / "analysis" / "events.parquet"
    out.mkdir(parents=True)
    rows = [{f.name: r.get(f.name) for f in SCHEMA} for r in records]
    # two bucket files, as the staging writes them (one per bucket)
    pq.write_table(pa.Table.from_pylist(rows[::2], schema=SCHEMA), out / "part-00000.parquet")
    pq.write_table(pa.Table.from_pylist(rows[1::2], schema=SCHEMA), out / "part-00001.parquet")
    (run_dir / "faults.jsonl").write_text("".join(json.dumps(f) + "\n" for f in faults))
    return run_dir


def _pub(seq: int, event: str, msg_id: str, ts: float, **kw) -> dict:
    return {"event": event, "ts": ts, "seq": seq, "agent": "pub", "msg_id": msg_id, **kw}


def _recv(agent: str, sub: str, seq: int, msg_id: str, ts: float) -> dict:
    return {"event": "received", "ts": ts, "seq": seq, "agent": agent, "msg_id": msg_id, "subscription": sub}


def _sub(agent: str, flt: str, seq: int, ts: float, durable: bool, qos: int) -> dict:
    return {
        "event": "subscribed",
        "ts": ts,
        "seq": seq,
        "agent": agent,
        "topic": flt,
        "durable": durable,
        "qos": qos,
    }


RECORDS = [
    # sub-a: t/# from the start (durable, qos 1; the resubscription does not count); sub-b: t/a,
    # late for m1, best-effort; sub-c logged no `subscribed` (it exists, expects nothing)
    _sub("sub-a", "t/#", 1, 1.0, True, 1),
    _sub("sub-a", "t/#", 9, 20.0, False, 0),
    _sub("sub-b", "t/a", 1, 10.0, False, 0),
    _pub(1, "send_attempt", "m1", 5.0, topic="t/a", qos=1),
    _pub(2, "sent", "m1", 5.1, qos=1),
    _pub(3, "send_attempt", "m2", 11.0, topic="t/b", qos=1),
    _pub(4, "sent", "m2", 11.1, qos=1),
    _pub(5, "send_attempt", "m3", 12.0, topic="t/a", qos=1),
    _pub(6, "sent", "m3", 12.1, qos=1),
    _pub(7, "send_attempt", "m4", 13.0, topic="t/a", qos=1),
    _pub(8, "dropped", "m4", 14.0, reason="publisher_timeout", handed_to_broker=False),
    _pub(9, "send_attempt", "m5", 15.0, topic="t/a", qos=1),
    _pub(10, "dropped", "m5", 16.0, reason="publisher_timeout", handed_to_broker=True),
    _pub(11, "send_attempt", "m6", 17.0, topic="t/a", qos=1),
    _pub(12, "send_attempt", "m7", 18.0, topic="u/x", qos=1),
    _pub(13, "sent", "m7", 18.1, qos=1),
    # sub-a's log: m6's receipt before m4's (m4 was sent before m6): one out of order
    _recv("sub-a", "t/#", 2, "m1", 5.2),
    _recv("sub-a", "t/#", 3, "m2", 11.2),
    _recv("sub-a", "t/#", 4, "m2", 11.3),
    _recv("sub-a", "t/#", 5, "m6", 17.5),
    _recv("sub-a", "t/#", 6, "m4", 14.5),
    _recv("sub-a", "t/#", 7, "m7", 18.6),
    _recv("sub-a", "t/#", 8, "x1", 19.0),
    _recv("sub-b", "t/a", 2, "m1", 5.3),
    _recv("sub-b", "t/a", 3, "m5", 16.5),
    _recv("sub-c", "u/#", 1, "m7", 18.4),
    {"event": "_malformed", "seq": 14, "agent": "pub"},
]
FAULTS = [
    {"event": "fault_start", "fault_id": "f1", "ts": 12.5},
    {"event": "fault_end", "fault_id": "f1", "ts": 13.0},
    {"event": "fault_start", "fault_id": "f2", "ts": 30.0},  # open: lasts until the last record
]


def test_hand_written_run(tmp_path):
    s = reconcile_pandas(_stage(tmp_path / "run", RECORDS, FAULTS))
    assert s["totals"] == {"attempted": 7, "acknowledged": 4, "dropped": 2, "in_doubt": 1}
    assert s["deliveries"] == {
        "expected": 10,
        "ok": 1,
        "duplicated": 1,
        "lost": 1,
        "missed": 1,
        "dropped_expected": 2,
        "ghost": 3,
        "in_doubt_missing": 1,
        "extra": 2,
        "misrouted": 1,
    }
    assert s["ghosts"] == {"timeout": 1, "dropped_other": 0, "in_doubt": 2}
    assert s["unexpected"] == 1
    assert s["malformed"] == 1
    assert s["out_of_order"] == {
        ("sub-a", "t/#", "pub"): 1,
        ("sub-b", "t/a", "pub"): 0,
        ("sub-c", "u/#", "pub"): 0,
    }
    lat = s["latency_s"]
    assert lat["count"] == 8
    assert (lat["p50"], lat["p95"], lat["p99"], lat["max"]) == pytest.approx((0.4, 1.5, 1.5, 1.5))
    pairs = sorted(
        (r.msg_id, r.sub_agent, r.filter, r.status, int(r.received), r.ghost_kind)
        for r in s["pairs"].itertuples()
    )
    assert pairs == [
        ("m1", "sub-a", "t/#", "ok", 1, ""),
        ("m1", "sub-b", "t/a", "extra", 1, ""),
        ("m2", "sub-a", "t/#", "duplicated", 2, ""),
        ("m3", "sub-a", "t/#", "lost", 0, ""),
        ("m3", "sub-b", "t/a", "missed", 0, ""),
        ("m4", "sub-a", "t/#", "ghost", 1, "timeout"),
        ("m4", "sub-b", "t/a", "dropped_expected", 0, ""),
        ("m5", "sub-a", "t/#", "dropped_expected", 0, ""),
        ("m5", "sub-b", "t/a", "ghost", 1, "in_doubt"),
        ("m6", "sub-a", "t/#", "ghost", 1, "in_doubt"),
        ("m6", "sub-b", "t/a", "in_doubt_missing", 0, ""),
        ("m7", "sub-a", "t/#", "misrouted", 1, ""),
        ("m7", "sub-c", "u/#", "extra", 1, ""),
        ("x1", "sub-a", "t/#", "unexpected", 1, ""),
    ]
    f1, f2 = s["faults"]
    assert f1["fault_id"] == "f1" and f1["window"] == [12.5, 23.0]
    assert f1["anomalies"] == {
        "ghost": 3,
        "dropped_expected": 2,
        "in_doubt_missing": 1,
        "extra": 1,
        "misrouted": 1,
    }
    assert (f1["acknowledged_in_window"], f1["received_in_window"], f1["vacuous"]) == (1, 6, False)
    assert f1["recovery_s"] == {
        "pub": {"publisher": pytest.approx(5.6)},
        "sub-a": {"subscriber:t/#": pytest.approx(2.0)},
        "sub-b": {"subscriber:t/a": pytest.approx(4.0)},
        "sub-c": {"subscriber:u/#": pytest.approx(5.9)},
    }
    assert f2["window"] == [30.0, 40.0] and f2["anomalies"] == {} and f2["vacuous"]
    assert f2["recovery_s"] == {
        "pub": {"publisher": None},
        "sub-a": {"subscriber:t/#": None},
        "sub-b": {"subscriber:t/a": None},
        "sub-c": {"subscriber:u/#": None},
    }
    # other ghost-timeout reasons: m4's drop is then an other-drop ghost
    assert reconcile_pandas(tmp_path / "run", ghost_timeout_reasons=("shutdown",))["ghosts"] == {
        "timeout": 0,
        "dropped_other": 1,
        "in_doubt": 2,
    }


def test_run_without_staged_records(tmp_path):
    (tmp_path / "analysis" / "events.parquet").mkdir(parents=True)
    s = reconcile_pandas(tmp_path)
    assert s["totals"] == {"attempted": 0, "acknowledged": 0, "dropped": 0, "in_doubt": 0}
    assert set(s["deliveries"].values()) == {0}
    assert s["ghosts"] == {"timeout": 0, "dropped_other": 0, "in_doubt": 0}
    assert (s["unexpected"], s["malformed"], s["out_of_order"], s["faults"]) == (0, 0, {}, [])
    assert s["latency_s"] == {"p50": None, "p95": None, "p99": None, "max": None, "count": 0}
    assert s["pairs"].empty and {"msg_id", "sub_agent", "filter", "status", "received"} <= set(s["pairs"])
