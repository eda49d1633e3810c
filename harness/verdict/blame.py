"""Whose fault each lost, missed and duplicated delivery is: `agent`, `broker`, `fault` or `unknown`.

A run folder with the broker's account (brokers/account.jsonl, harness/account) is blamed from it
(`_from_account`): every line cites the broker's records, a race is named only from the mechanism
the account shows, and a gap in the account makes the row `unknown`. The rules below are the older
inference from the agent's log and the advisory witness, kept for folders made before the account
(their rows say so: `source` = "inferred").

- `fault`: acknowledged inside a black-hole / partition window and delivered to no subscription;
- `broker`: the agent held a granted subscription on a member that was up, and the message was
  acknowledged yet not delivered (with a consumer there, or without one; either way with the
  `Stealing link` lines of the subscription's client id before the grant, the link-stealing race,
  which the broker's log names even in an observer gap);
  or the agent resubscribed durably afterwards and the kept message never came (a bridge race
  across a network, a store that lost it); a duplicate the publisher sent once (a redelivery);
- `agent`: it held no subscription then and never resubscribed durably (or did so with a clean
  session); a duplicate the publisher sent again after its ack;
- `unknown`: the observer could not see the member then (an observer gap), and the broker's log
  names no steal of the subscription's link;
- `allowed`: what the contract allows, no broken promise: a duplicate published once and redelivered
  on an at-least-once subscription (QoS ≥ 1), as a broker does with what was in flight at a
  failover. Every other blame is an anomaly that breaks a promise (summary.json `contract`).

The rows go to analysis/blame.parquet (keyed like messages.parquet: msg_id, subscriber,
subscription), the counts to summary.json `blame`. messages.parquet (the Spark output) is read for
its anomalous rows only, with a pyarrow filter; it is never rewritten.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.account.journey import Account
from harness.faults.kinds import logged_names
from harness.verdict import fromaccount
from harness.verdict import resubscribed as resub
from harness.verdict.checks.witness import Life, lives, sub_ids
from harness.verdict.view import RunView
from harness.verdict.witness import line_of
from harness.witness import events as ev

CLASSES = ("lost", "missed", "duplicated")
BLAMES = ("agent", "broker", "fault", "unknown", "allowed")
ALLOWED = "allowed"  # the one blame that breaks nothing (at-least-once allows redeliveries)
CUT_FAULTS = logged_names("cuts")  # black hole, link down, isolation (harness/faults/kinds.py)
BLAME_FILE = "blame.parquet"  # under RUN_DIR/analysis/


@dataclass
class Blamed:
    msg_id: str
    subscriber: str
    subscription: str
    status: str
    blame: str
    ts: float | None
    evidence: list[str] = field(default_factory=list)
    race: str | None = None  # the broker race the account shows the mechanism of (races.KNOWN)
    hop: str | None = None  # where the account says the delivery ended (harness/account/journey.py)
    source: str = "inferred"  # "account": blamed from the broker's account

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "ts": round(self.ts, 3) if self.ts else None}


def anomalous_rows(run_dir: Path) -> tuple[list[dict[str, Any]], set[str]]:
    """The lost/missed/duplicated rows of messages.parquet, and which of their msg_ids reached some
    subscription (its `reached` column; read with a filter: the table can hold millions of rows)."""
    import pyarrow.parquet as pq

    path = Path(run_dir) / "analysis" / "messages.parquet"
    if not path.exists():
        return [], set()
    cols = [
        "msg_id",
        "subscriber",
        "subscription",
        "status",
        "durable",
        "ack_ts",
        "first_attempt_ts",
        "reached",
    ]
    rows = pq.read_table(path, columns=cols, filters=[("status", "in", list(CLASSES))]).to_pylist()
    delivered = {str(r["msg_id"]) for r in rows if r.get("reached") and r.get("msg_id") is not None}
    return rows, delivered


def assign(v: RunView) -> list[Blamed]:
    rows, delivered = anomalous_rows(v.run_dir)
    if not rows:
        return []
    acc = fromaccount.load(v, {str(r["msg_id"]) for r in rows})
    if acc is not None:
        sends = _sends(v)
        return [_from_account(v, acc, r, sends.get(str(r["msg_id"]), [])) for r in rows]
    return _inferred(v, rows, delivered)


def _sends(v: RunView) -> dict[str, list[dict[str, Any]]]:
    """msg_id -> the publisher's `sent` and `send_attempt` records of it."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in v.events("sent") + v.events("send_attempt"):
        out.setdefault(str(r.get("msg_id")), []).append(r)
    return out


def _from_account(v: RunView, acc: Account, r: dict[str, Any], sends: list[dict[str, Any]]) -> Blamed:
    status = str(r["status"])
    t = r.get("ack_ts") or r.get("first_attempt_ts")
    key = (str(r.get("subscriber")), str(r.get("subscription")))
    race: str | None = None
    if status == "duplicated":
        acked = [s["ts"] for s in sends if s.get("event") == "sent"]
        again = len(acked) > 1 or any(
            s.get("event") == "send_attempt" and acked and s["ts"] > min(acked) for s in sends
        )
        blame, h = fromaccount.duplicate(v, acc, r, _qos(v, key), again)
    else:
        blame, race, h = fromaccount.missing(v, acc, r)
    return Blamed(str(r["msg_id"]), key[0], key[1], status, blame, t, h.lines, race, h.hop, "account")


def _inferred(v: RunView, rows: list[dict[str, Any]], delivered: set[str]) -> list[Blamed]:
    by_sub: dict[tuple[str, str], list[Life]] = {}
    for life in lives(v):
        by_sub.setdefault((life.agent, life.topic), []).append(life)
    sends = _sends(v)
    out = []
    for r in rows:
        status = str(r["status"])
        t = r.get("ack_ts") or r.get("first_attempt_ts")
        key = (str(r.get("subscriber")), str(r.get("subscription")))
        if status == "duplicated":
            blame, lines = _duplicate(sends.get(str(r["msg_id"]), []), _qos(v, key), _failover(v, t))
        else:
            blame, lines = _missing(v, r, t, by_sub.get(key, []), str(r["msg_id"]) in delivered, sends)
        out.append(Blamed(str(r["msg_id"]), key[0], key[1], status, blame, t, lines))
    return out


def _duplicate(sends: list[dict[str, Any]], qos: int = 1, failover: str = "") -> tuple[str, list[str]]:
    acked = [s["ts"] for s in sends if s.get("event") == "sent"]
    again = [s for s in sends if acked and s.get("event") == "send_attempt" and s["ts"] > min(acked)]
    if len(acked) > 1 or again:
        return "agent", [f"the publisher sent it again after its ack at {min(acked):.3f}"]
    if qos >= 1:
        return ALLOWED, [
            f"published once, redelivered on a QoS {qos} subscription{failover}: at-least-once allows it"
        ]
    return "broker", ["published once, delivered more than once on a QoS 0 (at-most-once) subscription"]


def _qos(v: RunView, key: tuple[str, str]) -> int:
    """The QoS the workload asks of a subscription (the contract, whatever the agent used)."""
    wl = (v.agents.get(key[0]) or {}).get("workload") or {}
    for s in wl.get("subscriptions") or []:
        if isinstance(s, dict) and str(s.get("topic")) == key[1]:
            return int(s.get("qos", 1) or 0)
    return 1


def _failover(v: RunView, t: float | None) -> str:
    near = [w.fault_id for w in v.faults if t is not None and w.covers(t, 1.0, 10.0)]
    return f" at a failover ({near[0]})" if near else ""


def _missing(
    v: RunView,
    r: dict[str, Any],
    t: float | None,
    subs: list[Life],
    delivered: bool,
    sends: dict[str, list[dict[str, Any]]],
) -> tuple[str, list[str]]:
    if t is None:
        return "unknown", ["no acknowledgement or attempt time"]
    w = v.witness
    cut = [f for f in v.faults if f.fault in CUT_FAULTS and f.covers(t)]
    if cut and not delivered:
        return "fault", [f"acknowledged at {t:.3f} inside {cut[0].fault_id}, delivered to no subscription"]
    ids, dest = (
        sub_ids(v, key_agent(r), str(r.get("subscription"))),
        ev.topic_destination(str(r.get("subscription"))),
    )
    pub = next((s for s in sends.get(str(r["msg_id"]), []) if s.get("event") == "sent"), {})
    pub_member = v.broker(pub.get("broker"))
    live = next((s for s in subs if s.start <= t < s.end and s.member), None)
    if live and live.member and not w.down_reason(live.member, t):
        has = w.has_consumer(live.member, t, ids, dest)
        where = f"{live.member} (granted {live.start:.3f})"
        stolen = w.stolen(live.member, ids, live.start - 30.0, t)
        steals = [line_of(x) for x in stolen[:3]]
        if has is None:
            gap = f"observer gap on {live.member} at {t:.3f}"
            if not (ids and stolen):
                return "unknown", [gap]
            # the broker's own log (not the observer) names the race for this subscription's ids
            lines = [f"{gap}; granted on {where}, acknowledged by {pub_member}, not delivered"]
            return "broker", lines + steals
        if has:
            # a steal just before the grant is the link-stealing race: the advisories show the new
            # consumer, while the old connection's late deactivation left it dispatching nothing
            lines = [f"a consumer existed on {where}; acknowledged by {pub_member} at {t:.3f}, not delivered"]
            lines += steals if ids else []  # unknown ids: any client's steal
            return "broker", lines + _bridge_lines(v, pub_member, live.member, t, dest)
        lines = [f"granted subscription with no consumer on {where} at {t:.3f}"]
        return "broker", lines + steals
    later = [s for s in subs if s.start > t and s.member and v.group_of(s.member) is not None]
    if not later:
        restored = _restored(v, key_agent(r), str(r.get("subscription")), t)
        if restored is not None and r.get("durable", True):  # C-11: the broker's restore is a resubscribe
            return "broker", [
                f"not subscribed at {t:.3f}; resubscribed durably on its restored session "
                f"({restored.how} at {restored.ts:.3f}), never delivered"
            ]
        return "agent", [f"not subscribed at {t:.3f} and never resubscribed after"]
    back = later[0]
    if not any(s.start <= t for s in subs):
        # no session of this subscription existed yet, so no broker held the message for it (e.g.
        # no_connect_timeout stuck on a black hole while the publisher went on)
        return "agent", [
            f"first subscribed at {back.start:.3f}, after the message was acknowledged at {t:.3f}"
        ]
    if not back.durable or not r.get("durable", True):
        return "agent", [
            f"not subscribed at {t:.3f}; resubscribed at {back.start:.3f} without a durable session"
        ]
    lines = [
        f"not subscribed at {t:.3f}; resubscribed durably on {back.member} at {back.start:.3f}, "
        "never delivered"
    ]
    return "broker", lines + _bridge_lines(v, pub_member, back.member, t, dest)


def _restored(v: RunView, agent: str, topic: str, t: float) -> resub.Back | None:
    """The session the broker restored (no `subscribed` logged, docs/agent-contract.md C-11) on the
    role's last connection at or before t, or on a later one: when it was back, as resubscribed.py
    answers it for every promise."""
    role = f"subscriber:{topic}"
    recs = resub._by_role(v).get(agent, {}).get(role, [])
    went = [x for x in recs if resub._lets_go(x) and float(x["ts"]) <= t]  # its connection at t
    since = float(went[-1]["ts"]) - 1e-6 if went and went[-1].get("event") == "connected" else t
    got = resub.back_at(v, agent, role, since)
    return got if got is not None and got.how in (resub.RESTORED, resub.RECEIVING) else None


def key_agent(r: dict[str, Any]) -> str:
    return str(r.get("subscriber"))


def _bridge_lines(v: RunView, pub: str | None, sub: str | None, t: float, dest: str) -> list[str]:
    """Across a network (publisher and subscriber on different groups): the bridge events around t,
    and whether the publisher's member had the bridge's demand (a network consumer) for it then."""
    if not pub or not sub or v.group_of(pub) == v.group_of(sub):
        return []
    kinds = (ev.BRIDGE_ESTABLISHED, ev.BRIDGE_FAILED, ev.BRIDGE_STOPPED)
    near = [x for k in kinds for x in v.witness.log_events(k, None, t - 15.0, t + 15.0)]
    near.sort(key=lambda x: float(x["ts"]))
    first = "bridge race across the network: " + (line_of(near[0]) if near else "no bridge event near")
    return [first, *_demand_line(v, pub, t, dest), *(line_of(x) for x in near[1:4])]


def _demand_line(v: RunView, pub: str, t: float, dest: str) -> list[str]:
    """The bridge's demand for dest on the member that acknowledged the message: a message a new
    master accepts before its bridge registered the remote consumers is forwarded nowhere."""
    w = v.witness
    if not w.advisory or w.in_gap(pub, t):
        return []
    since = max((s for s in w.member(pub).started if s <= t), default=float("-inf"))  # its mastership
    added = _network_demand(v).get((pub, ev.served_topic(dest)), [])
    if any(since <= a <= t for a, _ in added):
        return [f"the bridge's demand for {dest} existed on {pub} at {t:.3f}"]
    later = [(a, rec) for a, rec in added if a > t]
    if not later:
        return [f"no bridge demand for {dest} on {pub} at {t:.3f}"]
    a, rec = later[0]
    seen = " (first seen in the observer's replay: it may be older)" if rec.get("snapshot") else ""
    late = f"its network consumer came {a - t:.3f} s after{seen}"
    return [f"no bridge demand for {dest} on {pub} at {t:.3f}: {late}"]


def _network_demand(v: RunView) -> dict[tuple[str, str], list[tuple[float, dict[str, Any]]]]:
    """(member, destination) -> the bridges' consumers added there (advisories marked `network`),
    in time order: indexed once per run (the witness view leaves network consumers out)."""
    cached = v.__dict__.get("_blame_network_demand")
    if cached is None:
        cached = {}
        for r in v.broker_events:
            if r.get("event") == ev.CONSUMER_ADDED and r.get("network"):
                key = (str(r.get("broker")), ev.served_topic(r.get("destination")))
                cached.setdefault(key, []).append((float(r["ts"]), r))
        v.__dict__["_blame_network_demand"] = cached
    return cached


def counts(rows: list[Blamed]) -> dict[str, dict[str, int]]:
    c = Counter((b.status, b.blame) for b in rows)
    return {s: {b: c[(s, b)] for b in BLAMES} for s in CLASSES}


def contract(rows: list[Blamed]) -> dict[str, dict[str, int]]:
    """summary.json `contract`: per class, the anomalies the contract allows and those that break it."""
    return {
        kind: {
            s: sum(1 for b in rows if b.status == s and (b.blame == ALLOWED) == (kind == "allowed"))
            for s in CLASSES
        }
        for kind in ("allowed", "breaks")
    }


def write(v: RunView, rows: list[Blamed]) -> Path:
    """analysis/blame.parquet: one row per anomalous delivery, keyed like messages.parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("run", pa.string()),
            ("msg_id", pa.string()),
            ("subscriber", pa.string()),
            ("subscription", pa.string()),
            ("status", pa.string()),
            ("blame", pa.string()),
            ("ts", pa.float64()),
            ("evidence", pa.list_(pa.string())),
            ("race", pa.string()),
            ("hop", pa.string()),
            ("source", pa.string()),
        ]
    )
    run = str(v.run.get("run") or v.summary.get("run") or v.run_dir.name)
    table = pa.Table.from_pylist([{"run": run, **b.__dict__} for b in rows], schema=schema)
    path = v.run_dir / "analysis" / BLAME_FILE
    tmp = path.with_suffix(".tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)
    return path


def read(run_dir: Path, columns: list[str] | None = None) -> list[dict[str, Any]]:
    """The rows of analysis/blame.parquet (none when the run has not been judged)."""
    import pyarrow.parquet as pq

    path = Path(run_dir) / "analysis" / BLAME_FILE
    return pq.read_table(path, columns=columns).to_pylist() if path.exists() else []
