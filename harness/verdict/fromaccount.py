"""Blame from the broker's account: each anomalous delivery's hop (harness/account/journey.py)
mapped to whose it is, every line citing broker records (docs/verdict.md, "Blame").

- `agent`: the broker dispatched it to the agent's consumer and the client acked it (the agent
  never logged it); the broker removed the agent's connection with a delivery in flight and the
  agent logged no loss; no durable subscription of the agent's client id held it (never subscribed,
  not durable at the broker whatever the agent's log says, deleted by a clean session, or never
  back for what was kept); the agent's publisher logged `sent` for what no broker received; the
  agent logged more receipts than the broker dispatched.
- `broker`: a consumer of the agent's client id was attached and the broker never dispatched it;
  the durable subscription came back and the kept (or in-flight) message never came; it was never
  forwarded toward the subscriber's group.
- `fault`: never forwarded while a cut fault covered the bridge's brokers or links.
- `unknown`: the account has a gap there.
A race is named only from its mechanism in the account (races.KNOWN).
"""

from __future__ import annotations

from typing import Any

from harness.account.journey import Account, Consumer, Hop, rec_line
from harness.faults.kinds import logged_names
from harness.verdict import resubscribed as resub
from harness.verdict.view import RunView
from harness.verdict.witness import line_of

CUT_FAULTS = logged_names("cuts")
STEAL_BEFORE_S = 30.0  # a link stolen this long before the arrival can leave the consumer idle
LOGGED_WITHIN_S = 30.0  # an agent that noticed its lost connection logged it within this
NOT_LOSSES = ("shutdown", "publications_complete", "connect_failed")  # C-9


def client_ids(v: RunView, agent: str, topic: str) -> set[str]:
    """The subscription's client ids (resubscribed.sub_ids: the contract's, and any the agent logged)."""
    return resub.sub_ids(v, agent, topic) or set()


def load(v: RunView, msg_ids: set[str] | None) -> Account | None:
    """The run's broker account with the records of `msg_ids` (all with None; None: a folder made
    before the account)."""
    groups = {str(b): str(info.get("group")) for b, info in (v.run.get("brokers") or {}).items()}
    return Account.load(v.run_dir, groups, msg_ids)


def account(v: RunView) -> Account | None:
    """The run's account of consumers and connections (no message records), read once per view."""
    if "_account_consumers" not in v.__dict__:
        v.__dict__["_account_consumers"] = load(v, set())
    got: Account | None = v.__dict__["_account_consumers"]
    return got


def not_durable(v: RunView) -> list[dict[str, Any]]:
    """Subscriptions the workload asks durable (QoS >= 1) whose consumers at the broker were not
    durable: the broker's subscription decides, not the agent's `durable` field."""
    acc = account(v)
    if acc is None:
        return []
    out = []
    for agent, a in v.agents.items():
        for s in (a.get("workload") or {}).get("subscriptions") or []:
            if not isinstance(s, dict) or not s.get("durable", True) or int(s.get("qos", 1) or 0) < 1:
                continue
            topic = str(s.get("topic"))
            for cid in sorted(client_ids(v, agent, topic)):
                clean = [c for c in acc.by_client.get(cid, []) if not c.durable]
                if clean:
                    what = (
                        f"{agent} {topic}: the workload asks a durable subscription; the broker's "
                        f"{len(clean)} consumer(s) of {cid} had none, e.g. {clean[0].line()}"
                    )
                    out.append({"agent": agent, "ts": round(clean[0].added, 3), "what": what})
    return out


def missing(v: RunView, acc: Account, r: dict[str, Any]) -> tuple[str, str | None, Hop]:
    """(blame, race, hop) of a lost or missed delivery."""
    agent, topic, msg_id = str(r.get("subscriber")), str(r.get("subscription")), str(r["msg_id"])
    ids = client_ids(v, agent, topic)
    if not ids:
        return (
            "unknown",
            None,
            Hop("gap", [f"{agent} has no client id for {topic} (its workload does not list it)"]),
        )
    h = acc.hop(msg_id, ids)
    if h.hop == "gap":
        return "unknown", None, h
    if h.hop == "never_arrived":
        killed = _killed_near(v, r.get("ack_ts"))
        if killed:  # a kill -9 can take the member's last records with it (its writer's last flush)
            h.lines.append(f"acknowledged just before {killed}: the member's last records may be lost")
            return "unknown", None, Hop("gap", h.lines)
        h.lines.append(f"{agent}'s publisher logged it sent; the broker never received it")
        return "agent", None, h
    if h.hop == "acked":
        h.lines.append(f"the client acked it; {agent} never logged it received")
        return "agent", None, h
    if h.hop == "not_acked":
        return _in_flight(v, acc, h, agent, topic, ids)
    if h.hop == "not_forwarded":
        cut = _cut(v, h.facts.get("arrived"), bridge=True)
        if cut:
            h.lines.append(f"inside {cut}")
            return "fault", None, h
        return "broker", ("bridge-demand" if "demand_after" in h.facts else None), h
    return _held(v, acc, h, agent, topic, ids)


def _held(
    v: RunView, acc: Account, h: Hop, agent: str, topic: str, ids: set[str]
) -> tuple[str, str | None, Hop]:
    """Never dispatched to the agent's consumer: the broker's while a consumer of its client id was
    attached (unless the agent was stuck), or while its durable subscription came back."""
    f = h.facts
    if f.get("no_consumer_ever"):
        h.lines.append(f"{agent} never had a consumer of its client id at any broker")
        return "agent", None, h
    if f.get("attached"):
        silent = _unlogged_removal(v, agent, topic, h.consumer, f["arrived"])
        if silent:  # a stuck client: its prefetch full, never acked, expired by the broker
            h.lines.append(silent)
            return "agent", None, h
        race = "durable-reactivation" if "reactivated" in f else None
        stolen = _stolen(v, h.consumer.broker, ids, f["arrived"]) if h.consumer is not None else []
        if race is None and stolen:
            race = "link-stealing"
            h.lines += stolen  # the broker's own `Stealing link` lines for that client id
        return "broker", race, h
    if f.get("durable_sub") and f.get("back_durable"):
        cleaned = [
            d
            for d in acc.deleted
            if d.get("client_id") in ids and f["arrived"] <= float(d["ts"]) <= f["back"]
        ]
        if cleaned:  # a clean session before the durable one came back threw the kept messages away
            h.lines.append(f"a clean session deleted the durable subscription first: {rec_line(cleaned[0])}")
            return "agent", None, h
        return "broker", "durable-backlog", h
    if f.get("durable_sub"):
        h.lines.append(f"{agent} never came back on that subscription's group")
    return "agent", None, h


def _in_flight(
    v: RunView, acc: Account, h: Hop, agent: str, topic: str, ids: set[str]
) -> tuple[str, str | None, Hop]:
    c = h.consumer
    assert c is not None
    sent = float(h.facts["dispatched"])
    silent = _unlogged_removal(v, agent, topic, c, sent)
    if silent:
        h.lines.append(silent)
        return "agent", None, h
    if not c.durable:
        h.lines.append("the broker's subscription was not durable: nothing kept it for a reconnect")
        return "agent", None, h
    back = [x for x in acc.by_client.get(c.client_id or "", []) if x.added > sent and x.durable]
    if back:
        h.lines.append(f"the durable subscription came back ({back[0].line()}); never redelivered")
        return "broker", None, h
    h.lines.append(f"{agent} never came back on its durable subscription")
    return "agent", None, h


def _unlogged_removal(v: RunView, agent: str, topic: str, c: Consumer | None, since: float) -> str | None:
    """The broker removed the agent's consumer after `since`, before the agent was stopped, and the
    agent logged no loss of that connection (C-9: not a shutdown, not a failed attempt)."""
    if c is None or c.removed_by_broker == float("inf"):
        return None
    end = c.removed_by_broker
    stopped = (v.observations.get("agents_stopped_ts") or {}).get(agent)
    if isinstance(stopped, int | float) and end >= float(stopped) - 1.0:
        return None  # removed as the harness stopped the agent
    role = f"subscriber:{topic}"
    for x in v.records.get(agent, []):
        if (
            x.get("event") == "disconnected"
            and x.get("role") == role
            and not str(x.get("reason", "")).startswith(NOT_LOSSES)
            and since - 1.0 <= x["ts"] <= end + LOGGED_WITHIN_S
        ):
            return None
    return f"the broker removed {c.client_id}'s consumer at {end:.3f}; {agent} logged no loss"


def _cut(v: RunView, t: Any, bridge: bool = False) -> str | None:
    if not isinstance(t, int | float):
        return None
    bridges = {str(lk.get("name")) for lk in v.run.get("links") or [] if lk.get("kind") == "bridge"}
    for w in v.faults:
        if w.fault in CUT_FAULTS and w.covers(float(t)):
            names = set(w.target.split(","))
            if not bridge or names & bridges or v.affected_brokers(w):
                return f"{w.fault_id} ({w.fault} {w.target})"
    return None


def _killed_near(v: RunView, t: Any) -> str | None:
    """A kill -9 of a member within 2 s after t (the account of a killed broker ends abruptly)."""
    if not isinstance(t, int | float):
        return None
    for w in v.faults:
        if w.fault == "kill" and t - 0.5 <= w.start <= t + 2.0:
            return f"{w.fault_id} (kill {w.target} at {w.start:.3f})"
    return None


def _stolen(v: RunView, broker: str, ids: set[str], t: float) -> list[str]:
    """The broker log's `Stealing link` lines of these client ids in the 30 s before t."""
    return [line_of(x) for x in v.witness.stolen(broker, ids, t - STEAL_BEFORE_S, t)[:3]]


def duplicate(
    v: RunView, acc: Account, r: dict[str, Any], qos: int, resent_after_ack: bool
) -> tuple[str, Hop]:
    """Blame of a duplicated delivery from how often the broker received and dispatched it."""
    agent, topic, msg_id = str(r.get("subscriber")), str(r.get("subscription")), str(r["msg_id"])
    ids = client_ids(v, agent, topic)
    recs = acc.messages.get(msg_id, [])
    arrivals = [x for x in recs if x.get("event") == "arrived" and not x.get("via")]
    mine = {f"{c.broker}|{c.cid}" for cid in ids for c in acc.by_client.get(cid, [])}
    sent = [x for x in recs if x.get("event") == "dispatched" and f"{x['broker']}|{x.get('cid')}" in mine]
    lines = [rec_line(x) for x in (arrivals[:2] + sent[:3])]
    h = Hop("duplicated", lines)
    if not recs:
        why = acc.gap([], None)
        return (
            ("unknown", Hop("gap", [why]))
            if why
            else ("agent", Hop("duplicated", ["no broker record of it"]))
        )
    if len({x.get("mid") for x in arrivals}) > 1:
        h.lines.append(f"the broker received it {len(arrivals)} times from the publisher")
        if resent_after_ack:
            return "agent", h
        return ("allowed" if qos >= 1 else "broker"), h
    if len(sent) >= 2:
        h.lines.append(f"the broker dispatched it {len(sent)} times to {agent}'s consumers")
        return ("allowed" if qos >= 1 else "broker"), h
    h.lines.append(f"the broker dispatched it {len(sent)} time(s) to {agent}; {agent} logged more receipts")
    return "agent", h
