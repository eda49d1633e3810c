"""A harness in a subprocess for the orphan tests: brings a topology up, prints every pid it
started (brokers and fault proxy) as one JSON line, then waits to be killed or interrupted."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

from harness.run.env import Environment
from harness.topology import builtin_topology


def main() -> None:
    # A shell that started the test run in the background ignores SIGINT, and children inherit
    # that; this harness wants Ctrl-C (KeyboardInterrupt) like one started from a terminal.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    topology, run_dir = sys.argv[1], Path(sys.argv[2])
    with Environment.up(builtin_topology(topology), run_dir) as env:
        be = env.backend
        pids = {b: be.pid(b) for b in env.plan.brokers}  # type: ignore[attr-defined]
        proc = env.fault_proxy.proc
        pids["fault-proxy"] = proc.pid if proc is not None else None
        print(json.dumps(pids), flush=True)
        while True:
            time.sleep(1)


if __name__ == "__main__":
    main()
