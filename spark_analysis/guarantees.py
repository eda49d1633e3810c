"""Did each agent use the guarantee its workload demanded?

The workloads the agents were given are in ``RUN_DIR/run.json`` (``agents[].workload``). A
delivery is only as strong as the weakest link: the QoS the publisher actually sent at and the
QoS/durability the subscriber actually subscribed with. An agent that silently downgrades
(QoS 1 asked, QoS 0 used; a durable subscription made non-durable) turns a lost message into an
"allowed" miss, so the judge reports it as a violation. Input: the per-run facts the job already
collected (one row per distinct (event, agent, topic/filter, qos, durable) with a count), so this
costs no extra pass over the records.
"""

from __future__ import annotations

from typing import Any


def demanded(run_json: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """agent name -> {"pub": {topic: qos}, "sub": {filter: (qos, durable)}} from run.json."""
    out: dict[str, dict[str, Any]] = {}
    agents = (run_json or {}).get("agents")
    if not isinstance(agents, list):
        return out
    for a in agents:
        if not isinstance(a, dict) or not isinstance(a.get("workload"), dict):
            continue
        wl = a["workload"]
        name = a.get("name") or wl.get("agent")
        if not isinstance(name, str):
            continue
        pub = {
            p["topic"]: int(p.get("qos") or 0)
            for p in wl.get("publications") or []
            if isinstance(p, dict) and isinstance(p.get("topic"), str)
        }
        sub = {
            s["topic"]: (int(s.get("qos") or 0), bool(s.get("durable")))
            for s in wl.get("subscriptions") or []
            if isinstance(s, dict) and isinstance(s.get("topic"), str)
        }
        out[name] = {"pub": pub, "sub": sub}
    return out


def downgrades(run_json: dict[str, Any] | None, facts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every (agent, topic) where the records show a weaker guarantee than the workload asked.

    ``facts``: rows with event, agent, topic (the filter for ``subscribed``), qos, durable, n.
    A publication is downgraded when any ``sent`` record has a lower QoS than asked; a
    subscription when any ``subscribed`` record has a lower QoS, or is not durable though a
    durable one was asked (every resubscription counts, not just the first).
    """
    want = demanded(run_json)
    found: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in facts:
        w = want.get(r.get("agent") or "")
        if w is None or r.get("topic") is None:
            continue
        qos = int(r.get("qos") or 0)
        if r["event"] == "sent" and r["topic"] in w["pub"]:
            asked_qos = w["pub"][r["topic"]]
            if qos < asked_qos:
                item = found.setdefault(
                    (r["agent"], "publish", r["topic"]),
                    {"asked": {"qos": asked_qos}, "got": {"qos": qos}, "records": 0},
                )
                item["got"]["qos"] = min(item["got"]["qos"], qos)
                item["records"] += r["n"]
        elif r["event"] == "subscribed" and r["topic"] in w["sub"]:
            asked_qos, asked_durable = w["sub"][r["topic"]]
            durable = bool(r.get("durable"))
            if qos < asked_qos or (asked_durable and not durable):
                item = found.setdefault(
                    (r["agent"], "subscribe", r["topic"]),
                    {
                        "asked": {"qos": asked_qos, "durable": asked_durable},
                        "got": {"qos": qos, "durable": durable},
                        "records": 0,
                    },
                )
                item["got"]["qos"] = min(item["got"]["qos"], qos)
                item["got"]["durable"] = item["got"]["durable"] and durable
                item["records"] += r["n"]
    return [{"agent": a, "kind": k, "topic": t, **v} for (a, k, t), v in sorted(found.items())]


def describe(d: dict[str, Any]) -> str:
    """One line, as in a failure message."""
    if d["kind"] == "publish":
        return f"{d['agent']} published {d['topic']} at QoS {d['got']['qos']} (asked {d['asked']['qos']})"
    got, asked = d["got"], d["asked"]
    return (
        f"{d['agent']} subscribed {d['topic']} with QoS {got['qos']} durable={got['durable']} "
        f"(asked QoS {asked['qos']} durable={asked['durable']})"
    )
