"""Synthetic run histories with known ground truth.

Two generators:

- :class:`History` — a small, explicit history (subscriptions, messages, receipts, faults, junk
  lines) written as real ``agents/*/messages.jsonl`` logs; :meth:`History.truth` is the expected
  classification, derived from the generator's own choices. Used by the property tests.
- :func:`write_bench_run` (spark_analysis/testing/bench.py) — millions of messages generated with
  vectorised numpy/pyarrow and staged. ``python -m spark_analysis.testing.synth RUN_DIR MESSAGES``
  does it in a process of its own and prints the ground truth as JSON.

The two generators encode the same classification rules (one per message, one vectorised): a
change to one is made to the other.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_analysis.statuses import STATUSES

# ---------------------------------------------------------------------------------------------
# small explicit histories (JSON Lines)
# ---------------------------------------------------------------------------------------------


@dataclass
class Sub:
    agent: str
    filter: str
    subscribed_ts: float | None  # None: never logged `subscribed` (e.g. the line was lost)
    durable: bool = True
    qos: int = 1
    resubscribes: int = 0  # extra `subscribed` records after the first (reconnects)


@dataclass
class Msg:
    msg_id: str
    publisher: str
    topic: str
    qos: int
    first_attempt_ts: float
    fate: str  # "acknowledged" | "dropped" | "in_doubt"
    attempts: int = 1
    drop_reason: str = "publisher_timeout"
    handed: bool = False  # the drop record's handed_to_broker: the broker may still deliver it
    # receipts: subscription index -> receipt timestamps
    receipts: dict[int, list[float]] = field(default_factory=dict)


@dataclass
class Fault:
    fault_id: str
    start: float
    end: float | None
    fault: str = "kill"
    target: str = "broker-a"


@dataclass
class History:
    run: str
    subs: list[Sub]
    msgs: list[Msg]
    #: receipts of msg_ids nobody attempted: (sub index, msg_id, ts)
    unexpected: list[tuple[int, str, float]] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    #: junk lines appended to the first agent's log (each one malformed)
    junk: list[str] = field(default_factory=list)
    #: end the publisher's log with a torn (half-written) record
    torn_tail: bool = False

    # -- writing ---------------------------------------------------------------------------
    def records(self) -> dict[str, list[dict[str, Any]]]:
        """Log records per agent, each agent's records in time order."""
        out: dict[str, list[tuple[float, int, dict[str, Any]]]] = {}
        n = 0

        def add(agent: str, rec: dict[str, Any]) -> None:
            nonlocal n
            n += 1
            out.setdefault(agent, []).append((rec["ts"], n, {"run": self.run, "agent": agent, **rec}))

        for s in self.subs:
            if s.subscribed_ts is None:
                continue
            for k in range(1 + s.resubscribes):
                add(
                    s.agent,
                    {
                        "ts": s.subscribed_ts + 7.0 * k,
                        "event": "subscribed",
                        "topic": s.filter,
                        "broker": "127.0.0.1:1883",
                        "qos": s.qos,
                        "durable": s.durable,
                    },
                )
        for m in self.msgs:
            common = {"msg_id": m.msg_id, "topic": m.topic}
            for a in range(1, m.attempts + 1):
                rec = {"ts": m.first_attempt_ts + 0.5 * (a - 1), "event": "send_attempt", **common}
                add(m.publisher, {**rec, "broker": "127.0.0.1:1883", "attempt": a, "qos": m.qos})
            end = m.first_attempt_ts + 0.5 * (m.attempts - 1)
            if m.fate == "acknowledged":
                rec = {"ts": end + 0.01, "event": "sent", **common, "broker": "127.0.0.1:1883"}
                add(m.publisher, {**rec, "attempts": m.attempts, "qos": m.qos})
            elif m.fate == "dropped":
                rec = {"ts": end + 0.02, "event": "dropped", **common}
                drop = {**rec, "reason": m.drop_reason, "attempts": m.attempts}
                add(m.publisher, {**drop, "handed_to_broker": True} if m.handed else drop)
            for si, times in m.receipts.items():
                s = self.subs[si]
                for ts in times:
                    rec = {"ts": ts, "event": "received", **common, "broker": "127.0.0.1:1883"}
                    add(s.agent, {**rec, "subscription": s.filter})
        for si, msg_id, ts in self.unexpected:
            s = self.subs[si]
            rec = {"ts": ts, "event": "received", "msg_id": msg_id, "topic": "x/unexpected"}
            add(s.agent, {**rec, "broker": "127.0.0.1:1883", "subscription": s.filter, "extra_field": [1]})
        return {
            agent: [r for _, _, r in sorted(recs, key=lambda t: (t[0], t[1]))] for agent, recs in out.items()
        }

    def write(self, run_dir: Path) -> Path:
        run_dir.mkdir(parents=True, exist_ok=True)
        recs = self.records()
        agents = sorted(recs) or ["idle"]
        for i, agent in enumerate(agents):
            d = run_dir / "agents" / agent
            d.mkdir(parents=True, exist_ok=True)
            lines = [json.dumps(r, separators=(",", ":")) for r in recs.get(agent, [])]
            if i == 0:
                lines.extend(self.junk)
            text = "\n".join(lines) + ("\n" if lines else "")
            if self.torn_tail and i == 0:
                text += (
                    '{"ts":'
                    + str(time.time())
                    + ',"run":"'
                    + self.run
                    + '","agent":"'
                    + agent
                    + '","event":"se'
                )
            (d / "messages.jsonl").write_text(text, encoding="utf-8")
        if self.faults:
            lines = []
            for f in self.faults:
                base = {
                    "run": self.run,
                    "fault_id": f.fault_id,
                    "fault": f.fault,
                    "target": f.target,
                    "params": {},
                }
                lines.append(json.dumps({"ts": f.start, **base, "event": "fault_start"}))
                if f.end is not None:
                    lines.append(json.dumps({"ts": f.end, **base, "event": "fault_end"}))
            (run_dir / "faults.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        return run_dir

    # -- ground truth from the generator's choices --------------------------------------------
    def expected_pair(self, m: Msg, si: int) -> bool:
        s = self.subs[si]
        return (
            s.subscribed_ts is not None
            and s.subscribed_ts < m.first_attempt_ts
            and mqtt_match(s.filter, m.topic)
        )

    def pair_status(self, m: Msg, si: int) -> str | None:
        s = self.subs[si]
        n = len(m.receipts.get(si, []))
        if self.expected_pair(m, si):
            if n > 0 and m.fate != "acknowledged":
                return "ghost"
            if n == 1:
                return "ok"
            if n > 1:
                return "duplicated"
            if m.fate == "acknowledged":
                return "lost" if m.qos >= 1 and s.durable and s.qos >= 1 else "missed"
            return "dropped_expected" if m.fate == "dropped" else "in_doubt_missing"
        if n == 0:
            return None
        if m.fate != "acknowledged":
            return "ghost"
        return "extra" if mqtt_match(s.filter, m.topic) else "misrouted"

    def truth(self) -> dict[str, Any]:
        statuses: Counter[str] = Counter()
        ghosts: Counter[str] = Counter()
        expected = 0
        for m in self.msgs:
            for si in range(len(self.subs)):
                expected += self.expected_pair(m, si)
                st = self.pair_status(m, si)
                if st is None:
                    continue
                statuses[st] += 1
                if st == "ghost":
                    handed = m.fate == "dropped" and m.handed
                    kind = "in_doubt" if m.fate == "in_doubt" or handed else "dropped_other"
                    if m.fate == "dropped" and not handed and m.drop_reason == "publisher_timeout":
                        kind = "timeout"
                    ghosts[kind] += 1
        fates = Counter(m.fate for m in self.msgs)
        return {
            "totals": {
                "attempted": len(self.msgs),
                "acknowledged": fates["acknowledged"],
                "dropped": fates["dropped"],
                "in_doubt": fates["in_doubt"],
            },
            "deliveries": {
                "expected": expected,
                **{k: statuses[k] for k in (*STATUSES, "extra", "misrouted")},
            },
            "ghosts": {k: ghosts[k] for k in ("timeout", "dropped_other", "in_doubt")},
            "unexpected": len({msg_id for _, msg_id, _ in self.unexpected}),
            "malformed": len(self.junk) + int(self.torn_tail),
        }


def tiny_history(run_dir: Path) -> Path:
    """A small run folder (20 messages, two subscriptions, one fault) whose reconcile loads the
    classes and compiles the plans every real reconcile uses: a Spark warm-up."""
    t0 = time.time() - 60
    subs = [Sub("agent-1", f, t0) for f in ("w/#", "w/+/y")]
    msgs = []
    for i in range(20):
        ts = t0 + 1 + i * 0.1
        got = {0: [ts + 0.02], 1: [ts + 0.02]}
        msgs.append(Msg(f"w-{i}", "agent-1", "w/x/y", 1, ts, "acknowledged", receipts=got))
    return History("warmup", subs, msgs, faults=[Fault("f1", t0 + 1.5, t0 + 2.0)]).write(run_dir)


def mqtt_match(topic_filter: str, topic: str) -> bool:
    """MQTT filter matching via a regular expression (independent of spark_analysis.mqtt)."""
    if topic.startswith("$") and topic_filter[:1] in ("+", "#"):
        return False
    levels = topic_filter.split("/")
    multi = levels[-1] == "#"
    if multi:
        levels = levels[:-1]
        if not levels:
            return True
    pattern = "/".join("[^/]*" if level == "+" else re.escape(level) for level in levels)
    if multi:
        pattern += "(/.*)?"  # `a/#` also matches `a`
    return re.fullmatch(pattern, topic, re.DOTALL) is not None


if __name__ == "__main__":
    from spark_analysis.testing.bench import main

    sys.exit(main(sys.argv[1:]))
