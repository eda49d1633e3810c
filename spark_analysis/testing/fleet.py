"""A generated fleet run folder: the shape of ``bfh run fleet-masterslave --fleet N``.

One group ``a``: the controller's subscriber ``ctl-sub-a`` (``instance/status/a/#``, the fan-in),
``members`` agents ``fleet-a-<i>`` (each subscribes to ``topology/a/#``, the fan-out, and
publishes ``status`` events to its own ``instance/status/a/<i>/InstanceStatusEvent``) and the
controller's publisher ``ctl-pub-a`` (``events`` topology events). The master is killed once:
every agent logs the lost connection, its reconnect and its resubscription, and the publishes
of the outage are attempted twice. A few pairs are seeded anomalies (lost, duplicated, a ghost
through a publisher timeout, a message in doubt, a late member whose early receipts are extra),
so the reconcile's every path has rows.

Written as the agents write them: ``agents/<agent>/messages.jsonl`` (harness/contracts/msglog.py),
``faults.jsonl`` (harness/contracts/faultlog.py) and ``run.json`` with each agent's workload.
``python -m spark_analysis.testing.fleet RUN_DIR MEMBERS EVENTS`` writes one from the command line.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

T0 = 1_750_000_000.0
MASTER, SLAVE = "127.0.0.1:21883", "127.0.0.1:21884"
TOPOLOGY_TOPIC = "topology/a/TopologyEvent"
STATUS_RATE = 2.0  # each member's status events per second


@dataclass(frozen=True)
class FleetSpec:
    members: int = 150
    events: int = 1000  # controller topology events, each to every member
    status: int = 30  # status events per member, each to the controller's subscriber
    rate: float = 10.0  # controller events per second
    seed: int = 1
    kill_at: float = 0.4  # share of the controller's events sent before the master dies
    outage_s: float = 3.0
    lost: int = 3  # acknowledged at-least-once pairs never received
    duplicated: int = 5

    @property
    def deliveries(self) -> int:
        return self.members * self.events + self.members * self.status


def member(i: int) -> str:
    return f"fleet-a-{i:03d}"


class _Logs:
    """Each agent's records, written in time order as its writer would have."""

    def __init__(self, run: str) -> None:
        self.run = run
        self.recs: dict[str, list[tuple[float, int, str]]] = {}
        self.n = 0

    def add(self, agent: str, ts: float, event: str, **fields: Any) -> None:
        self.n += 1
        rec = {"ts": round(ts, 6), "run": self.run, "agent": agent, "event": event, **fields}
        self.recs.setdefault(agent, []).append((ts, self.n, json.dumps(rec, separators=(",", ":"))))

    def write(self, run_dir: Path) -> None:
        for agent, recs in self.recs.items():
            d = run_dir / "agents" / agent
            d.mkdir(parents=True, exist_ok=True)
            recs.sort()
            (d / "messages.jsonl").write_text("".join(line + "\n" for _, _, line in recs), encoding="utf-8")


def _sessions(
    logs: _Logs, agent: str, role: str, filters: list[str], t_up: float, kill: float, back: float
) -> None:
    """An agent's connection history: connect to the master, lose it at the kill, fail once
    against the dead master, connect to the slave; each connect (re)subscribes its filters."""
    for ts, broker, reason in ((t_up, MASTER, "initial"), (back, SLAVE, "reconnect")):
        logs.add(agent, ts, "connected", broker=broker, role=role, reason=reason)
        for f in filters:
            logs.add(agent, ts + 0.002, "subscribed", topic=f, broker=broker, qos=1, durable=True)
        if reason == "initial":
            logs.add(agent, kill + 0.01, "disconnected", broker=MASTER, role=role, reason="connection_lost")
            logs.add(
                agent, kill + 0.5, "disconnected", broker=MASTER, role=role, reason="connect_failed: refused"
            )


def _publish(
    logs: _Logs, agent: str, msg_id: str, topic: str, ts: float, kill: float, back: float, fate: str
) -> float:
    """A publisher's records of one message; returns when the broker has it (for receipts)."""
    broker = MASTER if ts < kill else SLAVE
    attempts = 1
    logs.add(agent, ts, "send_attempt", msg_id=msg_id, topic=topic, broker=broker, attempt=1, qos=1)
    if kill <= ts < back:  # sent into the outage: attempted again on the slave
        attempts, ts = 2, back + 0.05
        logs.add(agent, ts, "send_attempt", msg_id=msg_id, topic=topic, broker=SLAVE, attempt=2, qos=1)
    if fate == "ack":
        to = broker if attempts == 1 else SLAVE
        logs.add(agent, ts + 0.004, "sent", msg_id=msg_id, topic=topic, broker=to, attempts=attempts, qos=1)
    elif fate == "timeout":
        logs.add(agent, ts + 15.0, "dropped", msg_id=msg_id, topic=topic, reason="publisher_timeout",
                 attempts=attempts, handed_to_broker=False)  # fmt: skip
    return ts


def _receipts(
    logs: _Logs, rng: random.Random, agent: str, filt: str, msg: tuple[str, str, float, str], times: int
) -> None:
    """``times`` receipts of ``msg`` (msg_id, topic, when the broker had it, which broker)."""
    msg_id, topic, at, broker = msg
    for k in range(times):
        ts = at + 0.008 + 0.004 * rng.random() + 0.005 * k
        logs.add(agent, ts, "received", msg_id=msg_id, topic=topic, broker=broker, subscription=filt)


def _workload(subs: list[str], pub: str | None, count: int, rate: float) -> dict[str, Any]:
    return {
        "protocol": "mqtt",
        "subscriptions": [{"topic": t, "qos": 1, "durable": True} for t in subs],
        "publications": [{"topic": pub, "qos": 1, "count": count, "rate_per_s": rate, "payload_bytes": 256}]
        if pub
        else [],
    }


def _run_files(run_dir: Path, spec: FleetSpec, kill: float, end: float) -> None:
    """``faults.jsonl`` (the master's kill) and ``run.json`` (the run id and every workload)."""
    run = run_dir.name
    fan_in = "instance/status/a/#"
    members = [member(i) for i in range(1, spec.members + 1)]
    fault = {
        "run": run,
        "fault_id": "f001-kill",
        "fault": "kill",
        "target": "broker-master",
        "params": {"signal": 9},
    }
    (run_dir / "faults.jsonl").write_text(
        json.dumps({"ts": kill, **fault, "event": "fault_start"}) + "\n"
        + json.dumps({"ts": kill + 0.05, **fault, "event": "fault_end"}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    agents = [{"name": "ctl-sub-a", "workload": _workload([fan_in], None, 0, 0)}]
    agents += [
        {
            "name": m,
            "workload": _workload(
                ["topology/a/#"],
                f"instance/status/a/{i + 1:03d}/InstanceStatusEvent",
                spec.status,
                STATUS_RATE,
            ),
        }  # fmt: skip
        for i, m in enumerate(members)
    ]
    agents.append({"name": "ctl-pub-a", "workload": _workload([], TOPOLOGY_TOPIC, spec.events, spec.rate)})
    record = {"run": run, "seed": spec.seed, "backend": "local", "agents": agents,
              "scenario": {"name": "fleet-masterslave", "params": {"fleet": spec.members}},
              "phases_s": {"traffic": end - T0}}  # fmt: skip
    (run_dir / "run.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def write_fleet_run(run_dir: Path, spec: FleetSpec) -> dict[str, Any]:
    """Write the run folder; returns what was seeded (deliveries and anomalies by kind)."""
    rng = random.Random(spec.seed)
    run = run_dir.name
    logs = _Logs(run)
    start = T0 + 5.0  # every subscription is confirmed before the controller publishes
    kill = start + spec.kill_at * spec.events / spec.rate
    back = kill + spec.outage_s
    fan_in = "instance/status/a/#"
    members = [member(i) for i in range(1, spec.members + 1)]
    late = members[-1]  # subscribes after the controller's first events: their receipts are extra
    late_up = start + min(3.0, spec.events / spec.rate / 4)
    _sessions(logs, "ctl-sub-a", "subscriber", [fan_in], T0, kill, back)
    _sessions(logs, "ctl-pub-a", "publisher", [], T0 + 4.0, kill, back)
    for i, m in enumerate(members):
        _sessions(
            logs,
            m,
            "subscriber",
            ["topology/a/#"],
            late_up if m == late else T0 + 1.0 + 0.001 * i,
            kill,
            back,
        )
    # the anomalies, on messages chosen by the seed (never during the outage's retries)
    ctl_ids = [f"ctl-pub-a-0-{k}" for k in range(spec.events)]
    special = rng.sample(range(spec.events // 2, spec.events), 2)
    fates = {ctl_ids[special[0]]: "timeout", ctl_ids[special[1]]: "in_doubt"}
    lost = {(rng.randrange(spec.events), rng.randrange(spec.members)) for _ in range(spec.lost)}
    dup = {(rng.randrange(spec.events), rng.randrange(spec.members)) for _ in range(spec.duplicated)}
    for k, msg_id in enumerate(ctl_ids):
        ts = start + k / spec.rate
        fate = fates.get(msg_id, "ack")
        at = _publish(logs, "ctl-pub-a", msg_id, TOPOLOGY_TOPIC, ts, kill, back, fate)
        if fate == "in_doubt":
            continue
        got = (msg_id, TOPOLOGY_TOPIC, at, MASTER if at < kill else SLAVE)
        for i, m in enumerate(members):
            if (k, i) in lost or (fate == "timeout" and i % 2):
                continue
            _receipts(logs, rng, m, "topology/a/#", got, 2 if (k, i) in dup else 1)
    for i, m in enumerate(members):
        topic = f"instance/status/a/{i + 1:03d}/InstanceStatusEvent"
        for k in range(spec.status):
            ts = start + 0.37 * i / max(1, spec.members) + k / STATUS_RATE
            at = _publish(logs, m, f"{m}-0-{k}", topic, ts, kill, back, "ack")
            _receipts(
                logs, rng, "ctl-sub-a", fan_in, (f"{m}-0-{k}", topic, at, MASTER if at < kill else SLAVE), 1
            )
    logs.write(run_dir)
    end = start + max(spec.events / spec.rate, spec.status / STATUS_RATE) + 20.0
    _run_files(run_dir, spec, kill, end)
    return {"deliveries": spec.deliveries, "records": logs.n, "lost": len(lost), "duplicated": len(dup)}


def main(argv: list[str]) -> int:
    """``RUN_DIR MEMBERS EVENTS [STATUS]``: write a fleet run folder, print what was seeded."""
    if len(argv) not in (3, 4):
        print(
            "usage: python -m spark_analysis.testing.fleet RUN_DIR MEMBERS EVENTS [STATUS]", file=sys.stderr
        )
        return 2
    spec = FleetSpec(members=int(argv[1]), events=int(argv[2]), status=int(argv[3]) if len(argv) == 4 else 30)
    print(json.dumps(write_fleet_run(Path(argv[0]), spec)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
