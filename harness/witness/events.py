"""The broker event log contract (`RUN_DIR/brokers/events.jsonl`, docs/contracts.md).

One JSON object per line, sorted by `ts` (float Unix seconds, the harness clock). Every record has
`ts`, `event`, `broker`, `source` ("advisory": the witness observer; "log": a broker.log line).
Readers tolerate a torn last line and ignore fields they do not know.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.contracts.msglog import iter_records

EVENTS_FILE = "events.jsonl"  # under RUN_DIR/brokers/
OBSERVER_FILE = "observer.jsonl"  # the observer's raw records, merged into EVENTS_FILE by collect()

# From the advisory observer.
CONNECTION_ADDED = "connection_added"
CONNECTION_REMOVED = "connection_removed"
CONSUMER_ADDED = "consumer_added"
CONSUMER_REMOVED = "consumer_removed"
PRODUCER_ADDED = "producer_added"
PRODUCER_REMOVED = "producer_removed"
GAP_START = "observer_gap_start"  # the observer cannot see this broker from `ts` on
GAP_END = "observer_gap_end"  # ... and sees it again from `ts` (a snapshot of its state follows)
# From broker.log.
LINK_STOLEN = "link_stolen"
LOCK_WAITING = "store_lock_waiting"
LOCK_ACQUIRED = "store_lock_acquired"
BROKER_STARTED = "broker_started"
BROKER_STOPPED = "broker_stopped"
BRIDGE_ESTABLISHED = "bridge_established"
BRIDGE_FAILED = "bridge_failed"
BRIDGE_STOPPED = "bridge_stopped"
TRANSPORT_ERROR = "transport_error"

ADVISORY_EVENTS = frozenset(
    {CONNECTION_ADDED, CONNECTION_REMOVED, CONSUMER_ADDED, CONSUMER_REMOVED, PRODUCER_ADDED, PRODUCER_REMOVED}
)
GAP_EVENTS = frozenset({GAP_START, GAP_END})
LOG_EVENTS = frozenset(
    {
        LINK_STOLEN,
        LOCK_WAITING,
        LOCK_ACQUIRED,
        BROKER_STARTED,
        BROKER_STOPPED,
        BRIDGE_ESTABLISHED,
        BRIDGE_FAILED,
        BRIDGE_STOPPED,
        TRANSPORT_ERROR,
    }
)
EVENTS = ADVISORY_EVENTS | GAP_EVENTS | LOG_EVENTS


def write_events(path: str | Path, records: Iterable[dict[str, Any]]) -> int:
    """Write records sorted by ts (stable: equal ts keep their order); returns the count."""
    rows = sorted(records, key=lambda r: float(r.get("ts", 0.0)))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    tmp.replace(path)
    return len(rows)


def read_events(path: str | Path, malformed: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """Records of an events file with a numeric `ts`, an `event` and a `broker`; others skipped
    (and listed in `malformed` when given). A missing file yields nothing."""
    path = Path(path)
    if not path.exists():
        return
    for r in iter_records(path, malformed):
        if isinstance(r.get("ts"), int | float) and isinstance(r.get("event"), str) and "broker" in r:
            yield r
        elif malformed is not None:
            malformed.append(json.dumps(r)[:200])


_MQTT_TO_JMS = str.maketrans({"/": ".", ".": "/", "+": "*", "#": ">"})  # ActiveMQ swaps . and /


def topic_destination(mqtt_filter: str) -> str:
    """The JMS topic name ActiveMQ gives an MQTT-style topic or filter (`a/+/#` -> `a.*.>`)."""
    return mqtt_filter.translate(_MQTT_TO_JMS)


_VIRTUAL_QUEUE = re.compile(r"^queue://Consumer\.[^.]+\.VirtualTopic\.(.+)$")
_VIRTUAL_TOPIC = "VirtualTopic."


@lru_cache(maxsize=4096)  # asked per consumer question: a fleet's judge asks a million, of a few names
def served_topic(destination: object) -> str:
    """The JMS topic a consumer's destination serves. An MQTT connector with ActiveMQ's
    `mqtt-virtual-topic-subscriptions` strategy gives a durable subscription of `a/b` the queue
    `Consumer.<client>:<QoS>.VirtualTopic.a.b` and any other one the topic `VirtualTopic.a.b`: both
    serve `a.b`. Any other destination is itself."""
    d = str(destination)
    m = _VIRTUAL_QUEUE.match(d)
    if m:
        return m.group(1)
    return d[len(_VIRTUAL_TOPIC) :] if d.startswith(_VIRTUAL_TOPIC) else d


def consumers_at(
    events: Iterable[dict[str, Any]], broker: str, ts: float
) -> dict[str, dict[str, Any]] | None:
    """The consumers `broker` had at time `ts`, as the observer saw them: consumer id -> its
    `consumer_added` record; None when `ts` falls in an observer gap (unknown, not "none").

    After every gap the observer gets a snapshot of the broker's consumers, so the state is rebuilt
    from the last `observer_gap_end` at or before `ts`. `events` need not be sorted.
    """
    rows = sorted(
        (e for e in events if e.get("broker") == broker and e.get("source", "advisory") == "advisory"),
        key=lambda e: float(e["ts"]),
    )
    state: dict[str, dict[str, Any]] | None = None
    for e in rows:
        if float(e["ts"]) > ts:
            break
        ev = e.get("event")
        if ev == GAP_END:
            state = {}
        elif ev == GAP_START:
            state = None
        elif state is None:
            continue
        elif ev == CONSUMER_ADDED:
            state[str(e.get("consumer_id"))] = e
        elif ev == CONSUMER_REMOVED:
            state.pop(str(e.get("consumer_id")), None)
    return state


def has_consumer(
    events: Iterable[dict[str, Any]], broker: str, ts: float, client_id: str, destination: str
) -> bool | None:
    """Did `broker` have a consumer of `client_id` on `destination` (a JMS topic name, e.g. from
    `topic_destination`) at `ts`? None when the observer could not see `broker` then."""
    state = consumers_at(events, broker, ts)
    if state is None:
        return None
    return any(
        c.get("client_id") == client_id and served_topic(c.get("destination")) == served_topic(destination)
        for c in state.values()
    )
