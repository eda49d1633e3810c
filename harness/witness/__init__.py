"""The broker witness: the brokers' own view of a run (docs/contracts.md, broker event log).

- `events`: the contract of `brokers/events.jsonl` (names, writer, tolerant reader, queries);
- `observer`: the advisory observer (Observer.java) on each broker's harness-only connector;
- `brokerlog`: signatures from each broker.log;
- `collect()`: merges both into events.jsonl after the brokers stop (harness/run/env.py does it).
"""

from harness.witness.collect import collect
from harness.witness.events import consumers_at, has_consumer, read_events

__all__ = ["collect", "consumers_at", "has_consumer", "read_events"]
