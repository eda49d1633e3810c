"""Following the agents of a run: subscribed, publishing, done, settled (harness.run.runner's loop).

Observations, not errors: an agent that never subscribes or publishes is the verdict's finding.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness import procs
from harness.agents.launch import AgentProcess

console = Console(stderr=True, emoji=False)


def total(agent: AgentProcess) -> int:
    return sum(int(p["count"]) for p in agent.spec.workload.get("publications", []))


def subscribed_filters(agent: AgentProcess) -> int:
    return len({r.get("topic") for r in agent.records if r.get("event") == "subscribed"})


def has_subscribed(agent: AgentProcess, want: int) -> bool:
    return subscribed_filters(agent) >= want


def wait_subscribed(agents: list[AgentProcess], timeout: float) -> list[str]:
    """Wait for every subscription's first `subscribed`, one shared wait for all the agents (a
    fleet starts together); return the agents that did not get there (an observation for the
    verdict, not an error: an agent stuck on a black hole is a finding)."""
    deadline = time.monotonic() + timeout
    waiting = {a.spec.name: a for a in agents}
    dead: set[str] = set()
    while waiting and time.monotonic() < deadline:
        for name, a in list(waiting.items()):
            alive = a.alive()
            a.poll()
            if has_subscribed(a, len(a.spec.workload.get("subscriptions", []))):
                del waiting[name]
            elif not alive:
                dead.add(name)
                del waiting[name]
        if waiting:
            time.sleep(0.2)
    late = []
    for a in agents:
        if a.spec.name in waiting or a.spec.name in dead:
            console.log(
                f"[yellow]agent {a.spec.name} not subscribed within {timeout:.0f}s (alive={a.alive()})[/]"
            )
            late.append(a.spec.name)
    return late


FLEET_BARS = 8  # more agents than this: one progress bar for them all


def _label(agents: list[AgentProcess]) -> str:
    return agents[0].spec.name if len(agents) == 1 else f"{len(agents)} agents"


PUBLISH_WAIT_S = 30.0


def wait_publishing(agents: list[AgentProcess], timeout: float) -> list[str]:
    """Wait until every agent with publications made its first attempt; return those that did
    not (an observation: an agent that cannot publish is the verdict's finding, not an error)."""
    deadline = time.monotonic() + timeout
    late = []
    for a in agents:
        if total(a) and not a.wait_for(
            lambda x: x.counts["send_attempt"] + x.counts["sent"] + x.counts["dropped"] > 0,
            max(0.0, deadline - time.monotonic()),
        ):
            late.append(a.spec.name)
    return late


def drive(
    agents: list[AgentProcess], timeout: float, show: bool, faults_over: Callable[[], bool], stall_s: float
) -> bool:
    """Follow publishing until done; False when it stalled (no progress for `stall_s` after the faults)."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not show,
        transient=False,
    ) as progress:
        # a fleet gets one bar for all its agents, not a bar each
        rows = [[a] for a in agents] if len(agents) <= FLEET_BARS else [agents]
        tasks = [progress.add_task(_label(r), total=sum(total(a) for a in r)) for r in rows]
        deadline = time.monotonic() + timeout
        last, last_change = -1, time.monotonic()
        while time.monotonic() < deadline:
            for a in agents:
                a.poll()
            for task, r in zip(tasks, rows, strict=True):
                n = {k: sum(a.counts[k] for a in r) for k in ("sent", "dropped", "received")}
                progress.update(
                    task,
                    completed=n["sent"] + n["dropped"],
                    description=f"{_label(r)} sent={n['sent']} dropped={n['dropped']} "
                    f"received={n['received']}",
                )
            if all(a.publications_done() or not a.alive() for a in agents):
                return True
            done = sum(a.counts["sent"] + a.counts["dropped"] for a in agents)
            if done != last or not faults_over():
                last, last_change = done, time.monotonic()
            elif time.monotonic() - last_change > stall_s:
                console.log(f"[yellow]publishing stalled: no message sent or dropped for {stall_s:.0f}s[/]")
                return False
            time.sleep(0.25)
    console.log(f"[yellow]publications did not finish within {timeout:.0f}s[/]")
    return False


def settle(agents: list[AgentProcess], min_s: float, quiet_s: float, cap_s: float) -> None:
    """Wait at least `min_s`, then until no agent has received anything new for `quiet_s` (at most
    `cap_s`). The floor matters: a bridge or client in reconnect backoff delivers nothing for
    several seconds after the heal, and quiet during that gap does not mean the run is over.
    Unless the run is observed complete sooner: every sent message received on every subscription
    that matches it and every connection up again, then quiet for `DONE_QUIET_S`."""
    start = time.monotonic()
    last_change = start
    while time.monotonic() < start + cap_s:
        now = time.monotonic()
        if any(r.get("event") == "received" for a in agents for r in a.poll()):
            last_change = now
        elif (now - start >= min_s and now - last_change >= quiet_s) or (
            now - last_change >= DONE_QUIET_S and observed_complete(agents)
        ):
            return
        time.sleep(0.2)


DONE_QUIET_S = 1.0


def observed_complete(agents: list[AgentProcess]) -> bool:
    """Every `sent` message received by every subscription whose filter matches its topic (MQTT
    matching; a destination it cannot judge, e.g. a queue shared by consumers, keeps this False),
    and every subscriber role's last connection record `connected`."""
    from spark_analysis.mqtt import matches

    sent: dict[str, str] = {}
    for a in agents:
        roles: dict[str, str] = {}
        for r in a.records:
            ev = r.get("event")
            if ev == "sent":
                sent[str(r.get("msg_id"))] = str(r.get("topic"))
            elif ev in ("connected", "disconnected") and str(r.get("role")).startswith("subscriber"):
                roles[str(r.get("role"))] = str(ev)  # a publisher leaves once its publications are done
        if any(ev != "connected" for ev in roles.values()):
            return False
    # the messages each distinct filter must see, once per filter (a fleet's members share one:
    # per subscription it was members x messages filter matches, every 0.2 s of the settle)
    want: dict[str, set[str]] = {}
    for a in agents:
        got: dict[str, set[str]] = {}
        for r in a.records:
            if r.get("event") == "received":
                got.setdefault(str(r.get("subscription")), set()).add(str(r.get("msg_id")))
        for sub in a.spec.workload.get("subscriptions", []):
            f = str(sub["topic"])
            if f not in want:
                want[f] = {mid for mid, topic in sent.items() if matches(f, topic)}
            if not want[f] <= got.get(f, set()):
                return False
    return True


def stop_all(agents: list[AgentProcess], timeout: float = 10.0) -> dict[str, int | None]:
    """`AgentProcess.stop` for all at once: SIGTERM to every agent, then one shared wait with the
    same 10 s contract and SIGKILL fallback each (one by one, 100 agents took 22 s). Exit codes
    by agent name."""
    codes = procs.terminate_all([a.proc for a in agents], timeout)
    for a in agents:
        a.poll()
    return {a.spec.name: code for a, code in zip(agents, codes, strict=True)}
