"""One answer to "is this role subscribed again at t?" for every promise (docs/agent-contract.md
C-10, C-11): `recovery`, `fleet_recovery`, `reconnect_storm`, `no_agent_left_behind` and
`consumer_confirmed` all ask it here.

A subscriber is back after losing its connection at `since` when either
- it logs `subscribed` for its filter (the claim itself is judged by `consumer_confirmed`), or
- it logs `connected` for its role and, while that connection stands, the broker witness saw a
  consumer of its subscription (its client id, its destination) on the member that connection
  reached: a durable session the broker restored (MQTT clean_session=0, an OpenWire durable
  subscriber re-created by the failover transport) that the agent never subscribed again.
Never on the agent's word alone: a `connected` with no consumer at the broker is not back. A run
with no broker witness at all (folders from before it) keeps the older rule for restored sessions:
reconnected and then receiving on that subscription.
A publisher is back when it logs `connected` again.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any

from harness.verdict.view import RunView
from harness.verdict.witness import CLOCK_TOLERANCE_S
from harness.witness.events import topic_destination

SUBSCRIBED = "subscribed"  # back by its own `subscribed` record
RESTORED = "restored"  # back by a consumer the broker witness saw (a restored session)
RECEIVING = "receiving"  # no witness in the run: reconnected and receiving (older folders)


@dataclass(frozen=True)
class Back:
    ts: float
    how: str  # SUBSCRIBED, RESTORED, RECEIVING, or "connected" (a publisher)


def client_id(v: RunView, agent: str, topic: Any) -> str | None:
    """The client id of an agent's subscription (`<prefix>-<run>-<agent>-s<index>`, characters
    outside [A-Za-z0-9_-] as `_`); None when its workload does not list the filter."""
    index = v.subscription_index.get(agent, {}).get(topic)
    if index is None:
        return None
    prefix = str((v.agents.get(agent) or {}).get("conf", {}).get("mb.client.id.prefix", "bfh"))
    raw = "-".join(p for p in (prefix, str(v.run.get("run", "")), agent, f"s{index}") if p)
    return re.sub(r"[^A-Za-z0-9_-]", "_", raw)


def sub_ids(v: RunView, agent: str, topic: Any) -> set[str] | None:
    """The subscription's client ids: the contract's, and any the agent logged for the role
    (`client_id`, optional); None only when neither is known (its workload does not list the
    filter). Never matched on the destination alone: in a fleet another member's consumer of the
    same destination would confirm a claim whose client id the broker never saw."""
    ids = {c for c in [client_id(v, agent, topic)] if c} | _logged_ids(v).get((agent, str(topic)), set())
    return ids or None


def _logged_ids(v: RunView) -> dict[tuple[str, str], set[str]]:
    """(agent, filter) -> the client ids its records name (`client_id` on `connected` of the role
    `subscriber:<filter>`, or on `subscribed` of the filter): indexed once per view."""
    got = v.__dict__.get("_logged_client_ids")
    if got is None:
        got = {}
        for agent, recs in v.records.items():
            for r in recs:
                if not r.get("client_id"):
                    continue
                role = str(r.get("role") or "")
                topic = role.removeprefix("subscriber:") if role.startswith("subscriber:") else r.get("topic")
                if topic is not None:
                    got.setdefault((agent, str(topic)), set()).add(str(r["client_id"]))
        v.__dict__["_logged_client_ids"] = got
    return got


def _lets_go(r: dict[str, Any]) -> bool:
    """A record that ends a role's connection: a new connection or a real disconnect."""
    return r.get("event") == "connected" or (
        r.get("event") == "disconnected" and not str(r.get("reason", "")).startswith("connect_failed")
    )


def restored_at(v: RunView, agent: str, topic: Any, broker: Any, t0: float, t1: float) -> float | None:
    """The first time in [t0, t1] the witness saw a consumer of the agent's subscription added on
    the member `broker` (an address as the log writes it) leads to; None when it saw none. Matched
    by client id only: a fleet's members share destinations, so the destination alone proves nothing."""
    member, cid = v.broker(broker), client_id(v, agent, topic)
    if member is None or cid is None or cid not in v.consumer_client_ids:
        return None
    return v.witness.first_added_between(member, t0, t1, {cid}, topic_destination(str(topic)))


def _by_role(v: RunView) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """agent -> role -> the records about it (its connections, `subscribed` for its filter,
    `received` on it), in log order: built once per run, so a question costs the role's records,
    not the log's (one agent may hold thousands of subscriptions: issue 34)."""
    cached = v.__dict__.get("_resubscribed_by_role")
    if cached is not None:
        return cached
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for agent, recs in v.records.items():
        roles: dict[str, list[dict[str, Any]]] = {}
        for r in recs:
            ev = r.get("event")
            if ev in ("connected", "disconnected"):
                key = str(r.get("role"))
            elif ev == SUBSCRIBED:
                key = f"subscriber:{r.get('topic')}"
            elif ev == "received":
                key = f"subscriber:{r.get('subscription')}"
            else:
                continue
            roles.setdefault(key, []).append(r)
        out[agent] = roles
    v.__dict__["_resubscribed_by_role"] = out
    return out


def back_at(v: RunView, agent: str, role: str, since: float, until: float = float("inf")) -> Back | None:
    """When `role` of `agent` is back in (since, until] after losing its connection at `since`."""
    recs = _by_role(v).get(agent, {}).get(role, [])
    lo = bisect.bisect_right(recs, since, key=lambda r: r["ts"])
    if not role.startswith("subscriber:"):
        for r in recs[lo:]:
            if r["ts"] > until:
                continue  # a hand-made log may be out of order: the loaded ones are sorted
            if r.get("event") == "connected" and str(r.get("role")) == role:
                return Back(float(r["ts"]), "connected")
        return None
    topic = role.removeprefix("subscriber:")
    witnessed = v.witness.advisory
    conn: tuple[float, Any] | None = None  # the role's standing connection (since, broker)
    for r in recs[lo:]:
        ts, ev = float(r["ts"]), r.get("event")
        if ts > until:
            continue
        if ev == SUBSCRIBED and r.get("topic") == topic:
            return Back(ts, SUBSCRIBED)
        if str(r.get("role")) == role and _lets_go(r):
            if conn is not None and witnessed:
                seen = restored_at(v, agent, topic, conn[1], max(since, conn[0] - CLOCK_TOLERANCE_S), ts)
                if seen is not None:
                    return Back(max(seen, conn[0]), RESTORED)
            conn = (ts, r.get("broker")) if ev == "connected" else None
        elif ev == "received" and r.get("subscription") == topic and conn is not None and not witnessed:
            return Back(conn[0], RECEIVING)
    if conn is not None and witnessed:
        seen = restored_at(v, agent, topic, conn[1], max(since, conn[0] - CLOCK_TOLERANCE_S), until)
        if seen is not None:
            return Back(max(seen, conn[0]), RESTORED)
    return None


def restored(v: RunView) -> list[tuple[str, str, Back]]:
    """(agent, role, when) of every reconnect of a subscriber that logged no `subscribed` and was
    back by a consumer the witness saw: what `consumer_confirmed` reports beside the claims."""
    out = []
    for agent, recs in v.records.items():
        first: set[str] = set()
        for r in recs:
            role = str(r.get("role"))
            if r.get("event") != "connected" or not role.startswith("subscriber:"):
                continue
            if role not in first:  # its first connection: subscribing is the agent's to log
                first.add(role)
                continue
            got = back_at(v, agent, role, float(r["ts"]) - 1e-6)
            if got is not None and got.how == RESTORED:
                out.append((agent, role, got))
    return out
