"""Many agents in one process: a packed fleet (docs/fleet.md, "Packed members").

    python -m agent_under_test.reference.packed --members members.json [--module MODULE]

members.json is a list of `{"config": ..., "workload": ..., "log": ...}`, the three files of the
agent contract per member. Each member is its own instance of the agent class (the reference, or
the one agent class a defect module defines: `--module agent_under_test.defects.lockstep_retry`):
its own connections, client ids, jitter and message log, and the reference's own threads (one per
subscription, two for the publisher) plus one that runs it. Nothing of the semantics is written
again here. Threads, not one event loop, by measurement: docs/fleet.md.

SIGTERM/SIGINT stops every member at once; the process exits (0) once every member's log is
closed, within the contract's shutdown budget. A malformed members.json, agent.conf or workload
exits 2 with one line naming the file.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import resource
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from agent_under_test.config import EXIT_CONFIG, ConfigError, load_agent_conf, load_workload
from agent_under_test.reference.agent import SHUTDOWN_BUDGET_S, ReferenceAgent
from agent_under_test.reference.cli import quiet_client_logs

PROG = "agent_under_test.reference.packed"
REFERENCE_MODULE = "agent_under_test.reference"
# The members' threads mostly wait in select(); a small stack keeps thousands of them cheap.
THREAD_STACK = 512 * 1024
FD_COLLECT_AT = 600
SWITCH_INTERVAL_S = 0.05


def agent_class(module: str) -> type[ReferenceAgent]:
    """The agent class of `module`: the reference, or the one ReferenceAgent subclass it defines."""
    if module == REFERENCE_MODULE:
        return ReferenceAgent
    mod = importlib.import_module(module)
    found = [
        v
        for v in vars(mod).values()
        if isinstance(v, type) and issubclass(v, ReferenceAgent) and v.__module__ == mod.__name__
    ]
    if len(found) != 1:
        raise ConfigError(f"{module}: defines {len(found)} agent classes, not one")
    return found[0]


def load_members(path: Path, cls: type[ReferenceAgent]) -> list[ReferenceAgent]:
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: cannot read a JSON list ({e})") from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"{path}: must be a JSON list of {{config, workload, log}} objects")
    members = []
    for i, entry in enumerate(entries):
        missing = [k for k in ("config", "workload", "log") if not isinstance(entry.get(k), str)]
        if missing:
            raise ConfigError(f"{path}: member {i}: {', '.join(missing)} missing")
        conf, wl = load_agent_conf(entry["config"]), load_workload(entry["workload"])
        members.append(cls(conf, wl, Path(entry["log"])))
    return members


def raise_fd_limit() -> None:
    """Every member holds a log and a few sockets: take the hard limit of open files."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def reclaim_fds() -> None:
    """A closed paho client keeps its wake-up socket pair until the cycle collector frees it
    (the client and its link refer to each other); paho's loop() waits in select(), which fails
    on a descriptor past FD_SETSIZE. Collect once the open descriptors near it."""
    try:
        n = len(os.listdir("/proc/self/fd"))
    except OSError:
        return
    if n > FD_COLLECT_AT:
        gc.collect()


def run_members(members: list[ReferenceAgent], stopping: threading.Event) -> None:
    """Run every member on its own thread until `stopping`, then wait for their shutdowns."""
    threads = [threading.Thread(target=m.run, name=f"member-{m.wl.agent}", daemon=True) for m in members]
    for t in threads:
        t.start()
    # The main thread, where the signal handler runs, never waits on an Event (reference
    # agent.run: the handler's set() would deadlock on the lock a wait holds between bytecodes).
    ticks = 0
    while not stopping.is_set():
        time.sleep(0.05)
        ticks += 1
        if ticks % 10 == 0:
            if not any(t.is_alive() for t in threads):
                return
            reclaim_fds()
    for m in members:
        m.stop.set()
    deadline = time.monotonic() + SHUTDOWN_BUDGET_S + 1.0
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))


def main(argv: list[str] | None = None) -> None:
    stopping = threading.Event()
    members: list[ReferenceAgent] = []

    def on_signal(signum: int, frame: Any) -> None:
        if stopping.is_set():  # a second signal takes no lock
            return
        stopping.set()
        for m in members:
            m.stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--members", required=True, type=Path, help="members.json")
    p.add_argument("--module", default=REFERENCE_MODULE, help="the agent's module (a defect's)")
    args = p.parse_args(argv)
    try:
        members.extend(load_members(args.members, agent_class(args.module)))
    except (ConfigError, ImportError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None
    raise_fd_limit()
    quiet_client_logs()
    threading.stack_size(THREAD_STACK)
    # hundreds of threads that each wake briefly for I/O: a longer switch interval keeps the ones
    # waiting for the GIL from forcing a hand-over every 5 ms (a convoy of futex wake-ups)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    if stopping.is_set():  # a stop that came while the members loaded
        on_signal(signal.SIGTERM, None)
    run_members(members, stopping)
    # As the reference's cli: the logs are closed; leave without interpreter finalization.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
