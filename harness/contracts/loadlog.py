"""The machine's load during a run, RUN_DIR/load.jsonl: its one format, writer and reader.

The run loop samples it (harness/run/loadprobe.py); the verdict reads it (harness/verdict/
overload.py) to tell a timing promise broken by the agent from one broken by a machine that did
not give the harness and brokers the CPU they needed. One line per sample (about every second):

    {"ts": wall time of the sample, "probe_max_s": the probe thread's worst scheduling delay
     (oversleep of a 0.1 s sleep) since the last sample, "probe_sum_s": their sum, "probe_n": how
     many sleeps, "proxy_s": the fault proxy API's round trip (null: no answer), "brokers":
     {broker: seconds from TCP connect to the broker's first OpenWire byte, null: refused or
     unreachable (down, or a slave waiting for the lock)}, "load1": the 1-minute load average,
     "cpus": the CPUs the harness may run on (load1 / cpus: the run queue per core),
     "agents_cpu_s": the CPU seconds the agents' own processes (every fleet member's) used since
     the last sample (/proc/<pid>/stat; absent in folders from before it)}

run.json `observations.load` holds the summary (`summarize`): max and p99 per source and the
worst samples with their wall-clock times.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.contracts.jsonlines import num, read_samples, write_atomic

LOAD_FILE = "load.jsonl"
#: a sample whose delay is at least this is an overloaded moment (the probe's worst oversleep of a
#: 0.1 s sleep: ~4 ms idle, 20-80 ms beside `stress-ng --cpu 2|8|32`: wake-ups stay cheap on a
#: CPU-bound machine; half a second is a stall)
OVERLOADED_S = 0.5
#: a run queue of this many runnable threads per core (load1 / cpus) starves every process: each
#: gets about 1/L of a core, so a chain of work (an agent's publish, the broker's ack) takes about
#: L times as long. Measured on 2 cores: beside `stress-ng --cpu 2` the harness's runs stay at
#: load1 <= 8 (<= 4 per core), the default tier of a fresh-clone CI at <= 4.5 (<= 2.2 per core),
#: with other heavy work beside it at up to 13.5 (6.7 per core, the seeded defects still named);
#: the fresh-clone extended tier that starved the ops example's acks (5.5 s) ran at 22 (11 per
#: core) with the probe's oversleep under 0.5 s: a sleeper's wake-up stays cheap on a CPU-bound
#: machine, so only the run queue shows that starvation.
STARVED_PER_CORE = 8.0
#: a broker that accepted but sent nothing within this is recorded with this value: paused, or
#: frozen; the run summary counts these apart (only the verdict knows the faults' windows)
NO_ANSWER_S = 1.0
WORST = 5


def delay(row: dict[str, Any], skip_brokers: Iterable[str] = ()) -> tuple[float, str]:
    """A sample's delay: the worst of the probe's oversleep, the proxy's round trip and the
    answering brokers' (but those in `skip_brokers`: under a fault, slow by design), and its
    source."""
    best, source = num(row.get("probe_max_s")) or 0.0, "harness probe"
    proxy = num(row.get("proxy_s"))
    if proxy is not None and proxy > best:
        best, source = proxy, "fault proxy API"
    skip = set(skip_brokers)
    brokers = row.get("brokers")
    for name, answer in sorted(brokers.items() if isinstance(brokers, dict) else ()):
        s = num(answer)
        if name not in skip and s is not None and s > best:
            best, source = s, f"broker {name}"
    return best, source


def per_core(row: dict[str, Any]) -> float | None:
    """The sample's run queue per core (load1 / cpus); None without both (a folder from before)."""
    load, n = num(row.get("load1")), num(row.get("cpus"))
    return None if load is None or not n or n <= 0 else load / n


def agents_cores(row: dict[str, Any], interval_s: float) -> float:
    """The cores the agents' own processes kept busy over `interval_s` before this sample (0.0
    when not recorded)."""
    used = num(row.get("agents_cpu_s"))
    return used / interval_s if used is not None and used > 0 and interval_s > 0 else 0.0


def starved_s(row: dict[str, Any], interval_s: float = 1.0) -> float:
    """The seconds a runnable thread can have lost to the run queue over `interval_s` before this
    sample: (1 - 1/L) of it at L runnable threads per core, counted only from STARVED_PER_CORE on
    (below it the queue is a busy machine's, not a starved one's: the probe's delays speak)."""
    q = per_core(row)
    return interval_s * (1.0 - 1.0 / q) if q is not None and q >= STARVED_PER_CORE else 0.0


def clock(ts: float) -> str:
    """The wall-clock time of a sample, as evidence gives it: "12:01:07 UTC"."""
    return time.strftime("%H:%M:%S UTC", time.gmtime(ts))


def write(run_dir: Path, rows: list[dict[str, Any]]) -> Path:
    return write_atomic(Path(run_dir) / LOAD_FILE, rows)


def read(run_dir: Path) -> list[dict[str, Any]]:
    """The samples in time order; [] when the run has none (a folder from before the probe).
    Lines that are not a sample with a finite `ts` are skipped."""
    return read_samples(Path(run_dir) / LOAD_FILE)


def _stats(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"max_s": None, "p99_s": None}
    v = sorted(values)
    return {"max_s": round(v[-1], 4), "p99_s": round(v[min(len(v) - 1, int(len(v) * 0.99))], 4)}


def summarize(rows: list[dict[str, Any]], probe_delays: list[float]) -> dict[str, Any]:
    """The summary run.json keeps: max and p99 of each source, the load, the worst samples."""
    brokers = [
        float(s)
        for r in rows
        for s in ((r.get("brokers") or {}).values() if isinstance(r.get("brokers"), dict) else ())
        if num(s) is not None
    ]
    mute = [_mute(r) for r in rows]
    worst = sorted(zip(rows, mute, strict=True), key=lambda rm: -delay(*rm)[0])[:WORST]
    loads = [x for r in rows if (x := num(r.get("load1"))) is not None]
    queues = [q for r in rows if (q := per_core(r)) is not None]
    return {
        "file": LOAD_FILE,
        "samples": len(rows),
        "probe": _stats(probe_delays),
        "proxy": _stats([x for r in rows if (x := num(r.get("proxy_s"))) is not None]),
        "brokers": {
            **_stats([s for s in brokers if s < NO_ANSWER_S]),
            "no_answer": sum(1 for s in brokers if s >= NO_ANSWER_S),
        },
        "load1_max": max(loads, default=None),
        "cpus": next((num(r.get("cpus")) for r in rows if num(r.get("cpus"))), None),
        "load1_per_core_max": round(max(queues), 2) if queues else None,
        "starved_samples": sum(1 for q in queues if q >= STARVED_PER_CORE),
        "overloaded_samples": sum(
            1 for r, m in zip(rows, mute, strict=True) if delay(r, m)[0] >= OVERLOADED_S
        ),
        "worst": [
            {"ts": r["ts"], "at": clock(r["ts"]), "delay_s": round(d, 3), "source": src}
            for r, m in worst
            for d, src in [delay(r, m)]
        ],
    }


def _mute(row: dict[str, Any]) -> set[str]:
    """The brokers that did not answer in a sample (a pause or a freeze: the summary cannot tell)."""
    brokers = row.get("brokers")
    items = brokers.items() if isinstance(brokers, dict) else ()
    return {name for name, s in items if (x := num(s)) is not None and x >= NO_ANSWER_S}
