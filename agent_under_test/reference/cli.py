"""Command line shared by every agent of this package: --config --workload --log.

Exit status: 0 after SIGTERM/SIGINT and a clean shutdown; 2 with one line on stderr for a
malformed agent.conf, workload or command line.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn, Protocol

from agent_under_test.config import (
    EXIT_CONFIG,
    AgentConf,
    ConfigError,
    Workload,
    load_agent_conf,
    load_workload,
)


class Agent(Protocol):
    stop: threading.Event

    def run(self) -> int: ...


class _ArgParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG)


def parse_args(prog: str, argv: Sequence[str] | None) -> argparse.Namespace:
    p = _ArgParser(prog=prog, description="Broker-failover conformance agent (docs/agent-contract.md)")
    p.add_argument("--config", required=True, help="agent.conf (INI, [agent] section)")
    p.add_argument("--workload", required=True, help="workload.json")
    p.add_argument("--log", required=True, help="message log to append to (JSON Lines)")
    return p.parse_args(argv)


def load(prog: str, argv: Sequence[str] | None) -> tuple[AgentConf, Workload, Path]:
    args = parse_args(prog, argv)
    try:
        conf = load_agent_conf(args.config)
        wl = load_workload(args.workload)
    except ConfigError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None
    return conf, wl, Path(args.log)


def quiet_client_logs() -> None:
    """stomp.py and paho log connection trouble themselves; our message log says it better."""
    for name in ("stomp.py", "paho", "paho.mqtt", "paho.mqtt.client"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def main(
    prog: str, factory: Callable[[AgentConf, Workload, Path], Agent], argv: Sequence[str] | None = None
) -> NoReturn:
    # A stop request that arrives while the config loads is kept, not fatal (exit 0, not -15).
    early: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: early.append(signum))
    signal.signal(signal.SIGINT, lambda signum, frame: early.append(signum))
    conf, wl, log = load(prog, argv)
    quiet_client_logs()
    agent = factory(conf, wl, log)

    def _on_signal(signum: int, frame: object) -> None:
        if not agent.stop.is_set():  # a second signal takes no lock (Event.set's lock, held by a wait)
            agent.stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    if early:
        agent.stop.set()
    status = agent.run()
    # The log is closed. Client libraries' daemon threads (heart-beats, receivers) may still be
    # inside OpenSSL; interpreter finalization and OpenSSL's exit handler would free what they
    # use, so the process leaves without either.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
