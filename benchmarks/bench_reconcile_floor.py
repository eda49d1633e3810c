"""Probe: the least a Spark reconcile of a fleet folder costs on this machine (issue 44 item 3).

    flock /tmp/bfh-heavy.lock .venv/bin/python -m pytest benchmarks/bench_reconcile_floor.py \\
        -m benchmark -s -p no:xdist
    BFH_FLOOR_SIZES=150x1000,150x10 (members x controller events)  BFH_FLOOR_REPEAT=8
    BFH_FLOOR_DIR=/tmp/bfh-reconcile-floor

The reconcile's core written as the rewrite docs/fleet.md names would write it: one query of SQL
text (one py4j call), each message's publisher aggregate, the topic-filter matches, each
(message, subscription)'s receipts, joined, every pair classified, and the classes, flows,
latency bins and percentiles counted in one grouping-sets aggregate. It has none of the rest
(out-of-order streams, fault attribution, examples, messages.parquet), so its time is a floor
under any reconcile of the same shape. Per folder: the shipped reconcile's warm median, and the
probe's parse, plan and execution medians (the first ``BFH_FLOOR_REPEAT`` // 4 runs uncounted).
The probe's class counts must equal the shipped summary's (it computes the real thing).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spark_analysis.facts import read_facts  # noqa: E402
from spark_analysis.ingest import read_staged, stage  # noqa: E402
from spark_analysis.inputs import load_inputs, run_id_from_json  # noqa: E402
from spark_analysis.mqtt import matches  # noqa: E402
from spark_analysis.policy import Policy  # noqa: E402
from spark_analysis.reconcile import job_conf, reconcile  # noqa: E402
from spark_analysis.testing.fleet import FleetSpec, write_fleet_run  # noqa: E402

SIZES = [s for s in os.environ.get("BFH_FLOOR_SIZES", "150x1000,150x10").split(",") if s]
REPEAT = int(os.environ.get("BFH_FLOOR_REPEAT", "8"))
WORK = Path(os.environ.get("BFH_FLOOR_DIR", "/tmp/bfh-reconcile-floor"))

pytestmark = [pytest.mark.benchmark, pytest.mark.timeout(3600)]

# one run (rk 0); the views: ev (staged events), subs (subscriptions), tm (topic -> matched indexes)
CORE = """
WITH s AS (
  SELECT /*+ BROADCAST(sb) */ e.msg_id,
    CASE e.event WHEN 'send_attempt' THEN 0 WHEN 'sent' THEN 1 WHEN 'dropped' THEN 2 ELSE 3 END kind,
    e.ts, e.seq, e.agent, e.topic, e.qos, e.reason, e.handed_to_broker handed, sb.j
  FROM ev e LEFT JOIN subs sb ON e.agent = sb.agent AND e.subscription = sb.subscription
  WHERE e.event IN ('send_attempt', 'sent', 'dropped', 'received')),
m AS (SELECT msg_id,
  count(CASE WHEN kind < 3 THEN 1 END) pub_records,
  min(CASE WHEN kind < 3 THEN ts END) first_attempt_ts,
  min_by(agent, CASE WHEN kind < 3 THEN xxhash64(agent) END) publisher,
  min_by(topic, CASE WHEN kind < 3 THEN xxhash64(topic) END) topic,
  max(CASE WHEN kind <= 1 THEN qos END) qos,
  min(CASE WHEN kind = 1 THEN ts END) ack_ts,
  min(CASE WHEN kind = 2 THEN ts END) drop_ts,
  min_by(reason, CASE WHEN kind < 3 THEN xxhash64(reason) END) reason,
  max(CASE WHEN kind = 2 THEN handed END) handed,
  min(CASE WHEN kind = 3 THEN j END) first_received_j
  FROM s GROUP BY msg_id),
ms AS (SELECT /*+ BROADCAST(tm) */ m.*, tm.matched_js,
  CASE WHEN pub_records = 0 THEN 'unexpected' WHEN ack_ts IS NOT NULL THEN 'acknowledged'
       WHEN drop_ts IS NOT NULL THEN 'dropped' ELSE 'in_doubt' END state,
  least(array_min(tm.matched_js), first_received_j) first_kept
  FROM m LEFT JOIN tm ON m.topic = tm.topic),
kept AS (SELECT msg_id, j, max(mt) mt, sum(r) n, min(ts) f FROM (
  SELECT msg_id, explode(matched_js) j, true mt, 0 r, CAST(NULL AS double) ts FROM ms
  UNION ALL SELECT msg_id, j, false, 1, ts FROM s WHERE kind = 3 AND j IS NOT NULL) GROUP BY msg_id, j),
p AS (SELECT /*+ BROADCAST(sb) */ ms.*, k.j, coalesce(k.n, 0) received, k.f - ms.first_attempt_ts latency_s,
  coalesce(k.mt, false) matched, coalesce(k.mt AND sb.first_ts < ms.first_attempt_ts, false) expected,
  coalesce(k.j = ms.first_kept, k.j IS NULL) msg_row,
  coalesce(ms.qos, 0) >= 1 AND coalesce(sb.durable, false) AND coalesce(sb.qos, 1) >= 1 alo
  FROM ms LEFT JOIN kept k ON ms.msg_id = k.msg_id LEFT JOIN subs sb ON sb.j = k.j),
c AS (SELECT *, CASE WHEN j IS NULL THEN NULL WHEN state = 'unexpected' THEN 'unexpected'
  WHEN expected AND received > 0 AND state != 'acknowledged' THEN 'ghost'
  WHEN expected AND received = 1 THEN 'ok' WHEN expected AND received > 1 THEN 'duplicated'
  WHEN expected AND state = 'acknowledged' AND alo THEN 'lost'
  WHEN expected AND state = 'acknowledged' THEN 'missed'
  WHEN expected AND state = 'dropped' THEN 'dropped_expected' WHEN expected THEN 'in_doubt_missing'
  WHEN received > 0 AND state != 'acknowledged' THEN 'ghost'
  WHEN received > 0 AND matched THEN 'extra' WHEN received > 0 THEN 'misrouted' END status,
  CASE WHEN latency_s IS NOT NULL AND state != 'unexpected' THEN latency_s END lat
  FROM p)
SELECT to_json(struct(*)) FROM (
  SELECT status, msg_row, state, expected, alo, publisher, j, bin, grouping_id() g, count(1) n,
    sum(received) receipts, percentile_approx(lat, array(0.5, 0.95, 0.99), 10000) p, max(lat) mx
  FROM (SELECT *, CAST(greatest(floor(log10(greatest(lat, 1e-9)) * 4), -12) AS int) bin FROM c)
  GROUP BY GROUPING SETS ((status, msg_row, state, expected, alo), (publisher, j, status), (bin), ()))
"""


def _table(spark: Any, rows: list[dict[str, Any]], ddl: str, name: str) -> None:
    text = json.dumps(rows).replace("'", "\\u0027")  # a raw literal: JSON's escapes stay as they are
    spark.sql(f"SELECT inline(from_json(r'{text}', 'array<struct<{ddl}>>'))").createOrReplaceTempView(name)


def _probe(spark: Any, run_dir: Path) -> tuple[float, float, float, list[dict[str, Any]]]:
    """(parse s, plan s, execute s, rows) of the core query over the folder's staged events."""
    inputs = load_inputs([run_dir])
    sources = stage(spark, [run_dir], run_ids=[run_id_from_json(inputs[0].run_json)])
    with read_staged(spark, sources) as ev:
        facts = read_facts(ev, sources, inputs, Policy())
        ev.createOrReplaceTempView("ev")
        subs = [
            {k: s[k] for k in ("agent", "j", "first_ts", "durable", "qos")} | {"subscription": s["filter"]}
            for s in facts.subs
        ]
        ddl = "agent:string,subscription:string,j:int,first_ts:double,durable:boolean,qos:int"
        _table(spark, subs, ddl, "subs")
        tm = [
            {"topic": t, "matched_js": sorted(s["j"] for s in facts.subs if matches(s["filter"], t))}
            for _, t in facts.topics
        ]
        _table(spark, tm, "topic:string,matched_js:array<int>", "tm")
        t0 = time.perf_counter()
        df = spark.sql(CORE)
        t1 = time.perf_counter()
        df._jdf.queryExecution().executedPlan()
        t2 = time.perf_counter()
        rows = [json.loads(r[0]) for r in df.collect()]
        t3 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2, rows


def _median(xs: list[float]) -> float:
    return round(statistics.median(xs[len(xs) // 4 :]), 3)


def test_reconcile_floor() -> None:
    from spark_analysis.session import get_spark

    spark = get_spark()
    for k, v in job_conf(2).items():
        spark.conf.set(k, v)
    for size in SIZES:
        members, events = (int(x) for x in size.split("x"))
        d = WORK / f"fleet-{members}x{events}"
        if not (d / "run.json").exists():
            shutil.rmtree(d, ignore_errors=True)
            write_fleet_run(d, FleetSpec(members=members, events=events, status=30 if events >= 100 else 1))
        walls, summary = [], reconcile([d], spark=spark)[0]
        for _ in range(max(2, REPEAT // 2)):
            t = time.perf_counter()
            reconcile([d], spark=spark)
            walls.append(time.perf_counter() - t)
        parse, plan, execute = [], [], []
        for _ in range(REPEAT):
            a, b, c, rows = _probe(spark, d)
            parse.append(a)
            plan.append(b)
            execute.append(c)
        by_status: dict[str, int] = {}
        for r in rows:  # the first grouping set: grouping_id() 7 (publisher, j and bin not in it)
            if r["g"] == 7 and r["status"] not in (None, "unexpected"):
                by_status[r["status"]] = by_status.get(r["status"], 0) + r["n"]
        assert by_status.get("ok", 0) > 0.9 * summary["deliveries"]["expected"], by_status
        for status, n in by_status.items():
            assert summary["deliveries"][status] == n, (status, n, summary["deliveries"])
        row = {
            "folder": size,
            "deliveries": summary["deliveries"]["expected"],
            "reconcile_median_s": _median(walls),
            "core_parse_s": _median(parse),
            "core_plan_s": _median(plan),
            "core_execute_s": _median(execute),
            "core_execute_walls_s": [round(x, 2) for x in execute],
            "classes": by_status,
        }
        print(f"\n{json.dumps(row)}", flush=True)
