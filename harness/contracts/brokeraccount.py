"""The broker's account (docs/contracts.md, "The broker's account"): one owner of its files.

Each member's plugin (harness/account/BrokerAccount.java) appends to
`RUN_DIR/brokers/<member>/account.jsonl`; `collect()` merges every member's records into
`RUN_DIR/brokers/account.jsonl`, sorted by `ts`, each stamped with its `broker` (the member) and,
for a message forwarded over a bridge, `via_broker` (the member it came from). A member that ran
without the plugin leaves `account.unavailable` (why) instead, and is listed in
`brokers/account-gaps.json` with every `account_gap` (records the plugin had to drop).

spark_analysis reads the merged file through `MESSAGE_EVENTS` and `FILE`; the verdict through
`read()`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.contracts.msglog import iter_records

FILE = "account.jsonl"  # a member's, under RUN_DIR/brokers/<member>/; the merged one under brokers/
GAPS_FILE = "account-gaps.json"  # under RUN_DIR/brokers/: members without an account, dropped records
UNAVAILABLE_FILE = "account.unavailable"  # beside a member's account file: why it has none

# The plugin's events.
BROKER_STARTED = "broker_started"  # the member became master (a slave's chain starts only then)
BROKER_STOPPING = "broker_stopping"
CONNECTION_ADDED = "connection_added"
CONNECTION_REMOVED = "connection_removed"  # `error`: null for a clean close
CONSUMER_ADDED = "consumer_added"  # cid, client_id, conn, dest, subscription, durable, network
CONSUMER_REFUSED = "consumer_refused"
CONSUMER_REMOVED = "consumer_removed"
SUBSCRIPTION_DELETED = "subscription_deleted"  # a durable subscription removed (a clean session)
ARRIVED = "arrived"  # mid, msg_id, dest, client_id, conn, via (a bridge's source broker id)
REFUSED = "refused"
DISPATCHED = "dispatched"  # mid, msg_id, cid, dest, redelivery
ACKED = "acked"  # mid, msg_id, cid, type (MessageAck's ack type)
EXPIRED = "expired"
DEAD_LETTERED = "dead_lettered"  # moved: DLQ'd (true) or dropped (false)
DISCARDED = "discarded"
GAP = "account_gap"  # dropped: records the plugin could not queue

MESSAGE_EVENTS = (ARRIVED, DISPATCHED, ACKED, EXPIRED, DEAD_LETTERED, DISCARDED)


def member_files(run_dir: str | Path) -> dict[str, Path]:
    """{member: its account file} for every member folder of `brokers/` that ran a broker."""
    brokers = Path(run_dir) / "brokers"
    out = {}
    for d in sorted(brokers.iterdir()) if brokers.is_dir() else []:
        if d.is_dir() and (d / "conf").is_dir():
            out[d.name] = d / FILE
    return out


def collect(run_dir: str | Path) -> Path:
    """Merge the members' files into `brokers/account.jsonl` (and `account-gaps.json`)."""
    run_dir = Path(run_dir)
    records: list[dict[str, Any]] = []
    ids: dict[str, str] = {}
    gaps: dict[str, Any] = {"unavailable": {}, "dropped": []}
    for member, path in member_files(run_dir).items():
        why = path.with_name(UNAVAILABLE_FILE)
        if why.exists():
            gaps["unavailable"][member] = why.read_text(errors="replace").strip()[:300]
            continue
        if not path.exists():
            continue  # a slave that never became master writes nothing
        for r in iter_records(path):
            if not isinstance(r.get("ts"), int | float) or not isinstance(r.get("event"), str):
                continue
            r["broker"] = member
            if r["event"] == BROKER_STARTED and r.get("broker_id"):
                ids[str(r["broker_id"])] = member
            elif r["event"] == GAP:
                gaps["dropped"].append({"broker": member, "ts": r["ts"], "dropped": r.get("dropped")})
            records.append(r)
    records.sort(key=lambda r: float(r["ts"]))
    out = run_dir / "brokers" / FILE
    tmp = out.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for r in records:
            via = r.get("via")
            if via:
                r["via_broker"] = ids.get(str(via))
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    tmp.replace(out)
    (run_dir / "brokers" / GAPS_FILE).write_text(json.dumps(gaps, indent=1) + "\n")
    return out


def read(run_dir: str | Path) -> Iterator[dict[str, Any]]:
    """The merged account's records (none when the run has no account)."""
    path = Path(run_dir) / "brokers" / FILE
    if path.exists():
        yield from iter_records(path)


def gaps(run_dir: str | Path) -> dict[str, Any] | None:
    """`account-gaps.json` as written by `collect()`; None when the run was never collected (a
    folder from before the account, or one whose brokers never stopped)."""
    try:
        got = json.loads((Path(run_dir) / "brokers" / GAPS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return got if isinstance(got, dict) else None
