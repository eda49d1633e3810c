"""The observer's start-up hole (issue 35, soak round 4): a consumer created while the observer
subscribes to the advisories must still reach observer.jsonl (the replay of existing consumers
or the live advisory), else consumer_confirmed reports a reference agent's SUBACKed subscription
as "before the consumer". Real pair, real observer JVM, real MQTT subscribers started right as
the observer starts, repeated."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from harness.deploy.plan import Plan
from harness.run.env import Environment
from harness.topology import builtin_topology
from harness.witness import events as ev
from harness.witness import observer as witness_observer
from harness.witness.events import read_events

pytestmark = [pytest.mark.broker]

ROUNDS = 5
# one every STEP_S from the observer JVM's first record (it is connecting then): some land in the
# few milliseconds in which it subscribes to the advisories
SUBSCRIBERS = 100
STEP_S = 0.015


def _subscriber(host: str, port: int, client_id: str, subacked: dict[str, float]) -> mqtt.Client:
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False)

    def on_subscribe(*_: object) -> None:
        subacked[client_id] = time.time()

    c.on_subscribe = on_subscribe
    c.connect(host, port)
    c.loop_start()
    c.subscribe(f"startup/{client_id}/#", 1)  # a wildcard filter, as the agent's instance/status/#
    return c


def _wait(path: Path, event: str, broker: str, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(r["event"] == event and r["broker"] == broker for r in read_events(path)):
            return True
        time.sleep(0.005)
    return False


def _round(plan: Plan, master: str, url: str, n: int, folder: Path) -> tuple[list[str], list[str]]:
    """One observer start with subscribers racing it: (missed, unnamed) client ids."""
    host, _, port = url.rpartition(":")
    subacked: dict[str, float] = {}
    clients: list[mqtt.Client] = []

    def start_subscribers() -> None:
        _wait(folder / "brokers" / ev.OBSERVER_FILE, ev.GAP_START, master)
        for i in range(SUBSCRIBERS):
            clients.append(_subscriber(host, int(port), f"startup-{n}-{i}", subacked))
            time.sleep(STEP_S)

    feeder = threading.Thread(target=start_subscribers)
    feeder.start()
    obs = witness_observer.start(plan, folder)
    assert obs.proc is not None, obs.why_not
    feeder.join()
    assert _wait(obs.path, ev.GAP_END, master)
    time.sleep(2.5)  # the observer's re-snapshot comes 1 s after its gap_end
    obs.stop()
    added = [r for r in read_events(obs.path) if r["event"] == ev.CONSUMER_ADDED and r["broker"] == master]
    by_dest = {r.get("destination") for r in added}
    named = {r.get("client_id") for r in added}
    missed = [cid for cid in sorted(subacked) if f"startup.{cid}.>" not in by_dest]
    # a consumer seen without its client: the witness can only call its claim unknown
    unnamed = [cid for cid in sorted(subacked) if cid not in named and cid not in missed]
    for c in clients:
        c.disconnect()
        c.loop_stop()
    return missed, unnamed


def test_consumers_created_at_observer_startup_are_seen(tmp_path: Path) -> None:
    if not witness_observer.classpath():
        pytest.skip("no ActiveMQ client jars")
    missed: list[str] = []
    unnamed: list[str] = []
    with Environment.up(builtin_topology("pair"), tmp_path / "run", witness=False) as env:
        master = env.backend.master("pair")
        assert master
        urls = dict(zip([b.name for b in env.plan.members("pair")], env.mb_urls("mqtt", "pair"), strict=True))
        for n in range(ROUNDS):
            m, u = _round(env.plan, master, urls[master], n, tmp_path / f"obs-{n}")
            missed += [f"round {n}: {cid}" for cid in m]
            unnamed += [f"round {n}: {cid}" for cid in u]
            time.sleep(1.0)  # the last round's clients gone
    assert not missed, f"SUBACKed consumers the observer never reported: {missed}"
    assert not unnamed, f"SUBACKed consumers reported without their client: {unnamed}"
