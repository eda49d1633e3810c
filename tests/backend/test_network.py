"""Networks of master/slave pairs against real brokers, every bridge through the fault proxy.

Traffic: persistent STOMP messages to a queue, produced on one pair and consumed on the other
(queue messages wait on the producing broker until a bridge forwards them to demand). Counts
are by unique message id; duplicates are allowed (at-least-once), losses are not.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest

from harness.topology import builtin_topology

from .support import Consumer, Producer, bridge_established, env_up, wait_log

pytestmark = [pytest.mark.broker, pytest.mark.network, pytest.mark.extended, pytest.mark.timeout(900)]
FIGURES: dict[str, object] = {}


def _warm_up(producer: Producer, consumer: Consumer, timeout: float = 60.0) -> None:
    """Send until one message crosses the network (demand has propagated over the bridge)."""
    deadline = time.monotonic() + timeout
    k = 0
    while time.monotonic() < deadline:
        mid = f"warm-{k}"
        producer.send(mid)
        if not consumer.wait_for({mid}, 3.0):
            return
        k += 1
    pytest.fail(f"no message crossed the bridge within {timeout:.0f}s")


def test_network_of_pairs_master_kill_and_bridge_partition(tmp_path: Path) -> None:
    topo = builtin_topology("network-of-pairs")
    with env_up(topo, tmp_path / "run") as env:
        be = env.backend
        producer = Producer(env.mb_urls("stomp", "a"), "/queue/nop", name="producer-a")
        consumer = Consumer(env.mb_urls("stomp", "b"), "/queue/nop", name="consumer-b").start()
        try:
            _warm_up(producer, consumer)

            # 1. kill -9 B's master while A publishes: the bridge re-establishes to B's slave.
            master_b = be.master("b")
            assert master_b == "b-1"
            offsets = {b: be.log_size(b) for b in ("a-1", "b-2")}
            phase1 = [f"kill-{i}" for i in range(60)]
            t_kill = None
            for i, mid in enumerate(phase1):
                producer.send(mid)
                if i == 20:
                    t_kill = time.time()
                    be.kill("b-1")
                time.sleep(0.05)
            assert t_kill is not None
            new_master = be.wait_master("b", timeout=60)
            assert new_master == "b-2"
            t_established = wait_log(
                be,
                "a-1",
                offsets["a-1"],
                r"Network connection between vm://a-1#\d+ and \S+ \(b-2\) has been established",
                timeout=60,
            )
            assert t_established is not None, "A's bridge never re-established to B's new master b-2"
            missing = consumer.wait_for(set(phase1), timeout=90)
            assert not missing, f"{len(missing)} messages lost across B's master kill: {sorted(missing)[:10]}"
            FIGURES["bridge_reestablish_after_master_kill_s"] = round(t_established - t_kill, 2)

            # 2. partition every bridge between A and B for 20 s: messages wait on A, arrive after.
            links = [lk.name for lk in env.plan.bridge_links("a", "b") + env.plan.bridge_links("b", "a")]
            fault = env.faults.start("partition", links)
            t_part = time.monotonic()
            phase2 = [f"part-{i}" for i in range(40)]
            for mid in phase2:
                producer.send(mid)  # A accepts them (receipt) although B is unreachable
            while time.monotonic() - t_part < 20:
                time.sleep(0.5)
            early = set(phase2) & set(consumer.ids())
            assert not early, f"{len(early)} messages crossed a partitioned bridge: {sorted(early)[:5]}"
            t_heal = time.monotonic()
            env.faults.stop(fault)
            missing = consumer.wait_for(set(phase2), timeout=120)
            assert not missing, f"{len(missing)} messages never arrived after the partition healed"
            FIGURES["delivery_after_partition_heal_s"] = round(time.monotonic() - t_heal, 2)
            dup = sum(n - 1 for n in consumer.ids().values() if n > 1)
            FIGURES["network_of_pairs_duplicates"] = dup
            print(f"\nnetwork-of-pairs figures: {FIGURES}")
            assert bridge_established(be.log_since("a-1", offsets["a-1"]), "b-2")
        finally:
            consumer.stop()
            producer.close()


FAILED_CONNECT = "Could not start network bridge between"


def _bridge_behaviour(topo_name: str, uri: str, run_dir: Path) -> dict[str, object]:
    """Steady-state log spam, then a kill of B's master: re-establish time and delivery."""
    base = builtin_topology(topo_name)
    topo = base.model_copy(update={"bridges": [b.model_copy(update={"uri": uri}) for b in base.bridges]})
    out: dict[str, object] = {"uri": uri}
    with env_up(topo, run_dir) as env:
        be = env.backend
        producer = Producer(env.mb_urls("stomp", "a"), "/queue/s2", name="producer-a")
        consumer = Consumer(env.mb_urls("stomp", "b"), "/queue/s2", name="consumer-b").start()
        try:
            _warm_up(producer, consumer)
            time.sleep(15)  # steady state: both pairs healthy, slaves waiting for their lock
            out["failed_connects_steady_15s"] = be.log_since("a-1").count(FAILED_CONNECT)
            off = be.log_size("a-1")
            ids = [f"{uri}-{i}" for i in range(40)]
            t_kill = 0.0
            for i, mid in enumerate(ids):
                producer.send(mid)
                if i == 10:
                    t_kill = time.time()
                    be.kill("b-1")
                time.sleep(0.05)
            be.wait_master("b", 60)
            t_est = wait_log(
                be,
                "a-1",
                off,
                r"Network connection between vm://a-1#\d+ and \S+ \(b-2\) has been "
                r"established",
                timeout=90,
            )
            out["reestablish_s"] = None if t_est is None else round(t_est - t_kill, 2)
            missing = consumer.wait_for(set(ids), timeout=60 if t_est else 5)
            out["missing_after_kill"] = len(missing)
            time.sleep(10)  # b-1 stays dead: does the bridge keep knocking on it?
            out["failed_connects_after_kill"] = be.log_since("a-1", off).count(FAILED_CONNECT)
        finally:
            consumer.stop()
            producer.close()
    return out


def test_seed002_static_list_misbehaves_masterslave_recovers(tmp_path: Path) -> None:
    static = _bridge_behaviour("seed002-static-list", "static-list", tmp_path / "static-list")
    ms = _bridge_behaviour("seed002-static-list", "masterslave", tmp_path / "masterslave")
    FIGURES["seed002"] = {"static-list": static, "masterslave": ms}
    print(f"\nseed-002 figures: {FIGURES['seed002']}")
    # The anti-pattern: the static agent keeps a bridge per listed URI, so it knocks on the
    # waiting slave forever (seed 002's WARN spam), and after the kill on the dead master.
    assert static["failed_connects_steady_15s"] >= 3, static  # type: ignore[operator]
    assert static["failed_connects_after_kill"] >= 1, static  # type: ignore[operator]
    # masterslave: one bridge to whichever member serves: no failed-connect spam, prompt recovery.
    assert ms["failed_connects_steady_15s"] == 0, ms
    assert ms["failed_connects_after_kill"] == 0, ms
    assert ms["reestablish_s"] is not None and ms["reestablish_s"] < 30, ms  # type: ignore[operator]
    assert ms["missing_after_kill"] == 0, ms


class _Feed:
    """A producer thread sending numbered persistent messages until stopped."""

    def __init__(self, producer: Producer, prefix: str, rate: float = 8.0) -> None:
        self.producer, self.prefix, self.rate = producer, prefix, rate
        self.confirmed: list[str] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"feed-{prefix}")

    def _run(self) -> None:
        k = 0
        while not self._stop.is_set():
            mid = f"{self.prefix}-{k}"
            try:
                self.producer.send(mid, timeout=120)
            except TimeoutError as e:
                self.error = str(e)
                return
            self.confirmed.append(mid)
            k += 1
            self._stop.wait(1.0 / self.rate)

    def start(self) -> _Feed:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(150)
        self.producer.close()


def _ha_network(topo_name: str, run_dir: Path, rounds: int, seed: int) -> dict[str, object]:
    """Traffic both ways (A->B and B->A queues) while random brokers are killed and restarted."""
    rng = random.Random(seed)
    with env_up(builtin_topology(topo_name), run_dir) as env:
        be = env.backend
        cons_b = Consumer(env.mb_urls("stomp", "b"), "/queue/ab", name="consumer-b").start()
        cons_a = Consumer(env.mb_urls("stomp", "a"), "/queue/ba", name="consumer-a").start()
        feeds: list[_Feed] = []
        try:
            _warm_up(Producer(env.mb_urls("stomp", "a"), "/queue/ab"), cons_b)
            _warm_up(Producer(env.mb_urls("stomp", "b"), "/queue/ba"), cons_a)
            feeds = [
                _Feed(Producer(env.mb_urls("stomp", "a"), "/queue/ab"), "ab").start(),
                _Feed(Producer(env.mb_urls("stomp", "b"), "/queue/ba"), "ba").start(),
            ]
            actions = []
            # Every role of every pair is hit once, in a random order, at random moments.
            roles = [("master", "a"), ("master", "b"), ("slave", "a"), ("slave", "b")]
            rng.shuffle(roles)
            for role, group in roles[:rounds]:
                master = be.master(group)
                members = [b.name for b in env.plan.members(group)]
                victim = master if role == "master" else next(m for m in members if m != master)
                assert victim is not None, be.states()
                be.kill(victim)
                if role == "master":
                    be.wait_master(group, 60)
                time.sleep(rng.uniform(3, 6))
                be.start_broker(victim)  # comes back as a slave
                actions.append(f"{victim}({role})")
                time.sleep(rng.uniform(2, 4))
            time.sleep(3)
            for f in feeds:
                f.stop()
            errors = [f.error for f in feeds if f.error]
            missing_ab = cons_b.wait_for(set(feeds[0].confirmed), timeout=90)
            missing_ba = cons_a.wait_for(set(feeds[1].confirmed), timeout=30 if not missing_ab else 5)
            return {
                "kills": actions,
                "sent_ab": len(feeds[0].confirmed),
                "sent_ba": len(feeds[1].confirmed),
                "missing_ab": len(missing_ab),
                "missing_ba": len(missing_ba),
                "producer_errors": errors,
                "states": be.states(),
            }
        finally:
            for f in feeds:
                f.stop()
            cons_a.stop()
            cons_b.stop()


@pytest.mark.parametrize(
    "topo_name",
    ["seed003-ha-network", pytest.param("seed003-ha-network-masterslave", marks=pytest.mark.soak)],
)
def test_seed003_ha_network_random_kills(tmp_path: Path, topo_name: str) -> None:
    """Seed 003's HA network over STOMP: random kills/restarts, nothing stuck or lost.

    Holds with multicast discovery (the seed's configuration) and with masterslave: URIs naming
    both members of the other pair.
    """
    r = _ha_network(topo_name, tmp_path / "run", rounds=4, seed=3)
    FIGURES[topo_name] = r
    print(f"\n{topo_name}: {r}")
    assert r["sent_ab"] and r["sent_ba"], r
    assert not r["producer_errors"], r
    assert r["missing_ab"] == 0 and r["missing_ba"] == 0, f"stuck or lost messages: {r}"


def test_seed003_explicit_uris_to_one_member_get_stuck(tmp_path: Path) -> None:
    """Seed 003's report holds for explicit URIs naming one broker: after B's designated master
    dies, A->B traffic is stuck on A (its duplex bridge knows only b-1), while B->A still flows."""
    with env_up(builtin_topology("seed003-ha-network-static"), tmp_path / "run") as env:
        be = env.backend
        cons_b = Consumer(env.mb_urls("stomp", "b"), "/queue/ab", name="consumer-b").start()
        cons_a = Consumer(env.mb_urls("stomp", "a"), "/queue/ba", name="consumer-a").start()
        prod_a = Producer(env.mb_urls("stomp", "a"), "/queue/ab")
        prod_b = Producer(env.mb_urls("stomp", "b"), "/queue/ba")
        try:
            _warm_up(prod_a, cons_b)
            _warm_up(prod_b, cons_a)
            be.kill("b-1")
            assert be.wait_master("b", 60) == "b-2"
            be.start_broker("b-1")  # back, as a slave: the URI's broker exists but does not serve
            ab = [f"ab-{i}" for i in range(20)]
            ba = [f"ba-{i}" for i in range(20)]
            for a_id, b_id in zip(ab, ba, strict=True):
                prod_a.send(a_id)
                prod_b.send(b_id)
            missing_ba = cons_a.wait_for(set(ba), timeout=60)
            missing_ab = cons_b.wait_for(set(ab), timeout=30)
            FIGURES["seed003_static"] = {"missing_ab": len(missing_ab), "missing_ba": len(missing_ba)}
            print(f"\nseed-003 explicit URIs: {FIGURES['seed003_static']}")
            assert not missing_ba, f"B->A should still flow (b-2 bridges to a-1): {len(missing_ba)} missing"
            assert missing_ab == set(ab), (
                f"A->B should be stuck on A, but {len(set(ab) - missing_ab)} arrived"
            )
        finally:
            cons_a.stop()
            cons_b.stop()
            prod_a.close()
            prod_b.close()
