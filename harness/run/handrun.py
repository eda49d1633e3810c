"""A run driven by a test's own code (the pytest plugin's `bfh_env` fixture).

The topology comes up behind the fault proxy in its own run folder; the test launches agents on
the agent contract and applies faults itself (`faults`: a member or a link, roles such as
`master:pair` resolved when applied); `judge()` then heals, settles, stops the agents, takes the
environment down and reconciles and judges the folder exactly as a catalog entry is
(harness.run.runner.execute is the scheduled equivalent).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness.agents.launch import AgentProcess, agent_factory
from harness.faults.apply import Faults, Handle
from harness.faults.schedule import Schedule
from harness.run.env import Environment
from harness.run.runner import CATALOG_POLICY, Loop, RunResult, finish, run_loop
from harness.topology import Topology
from harness.verdict import DEFAULT_GATES, Verdict


class FaultHandle:
    """Kill, pause or partition a member or a link of the running environment.

    Targets: a broker, a link, a group, `bridges`, or a role `master:G` / `slave:G` / `members:G`
    (resolved now). Every window goes to faults.jsonl; `judge()` heals whatever is still open.
    """

    def __init__(self, faults: Faults) -> None:
        self.faults = faults

    def resolve(self, target: str) -> list[str]:
        return self.faults.resolve(target)

    def start(self, kind: str, target: str, **params: Any) -> Handle:
        """Any fault kind of harness/faults/kinds.py (roles resolved now); `heal(handle)` ends it."""
        return self.faults.start(kind, target, params)

    def kill(self, target: str, timeout: float = 60.0) -> float | None:
        """kill -9; returns the takeover time (kill to a member serving) for one broker."""
        h = self.start("kill", target, wait_takeover=True, timeout_s=timeout)
        return next(iter(h.results.values()), None)

    def pause(self, target: str) -> Handle:
        return self.start("pause", target)

    def partition(self, target: str) -> Handle:
        return self.start("partition", target)

    def heal(self, handle: Handle | None = None) -> None:
        """End one fault (its kind's own heal), or, as a scheduled run ends, every open one, with
        every stopped broker started again."""
        if handle is None:
            self.faults.restore()
        else:
            self.faults.stop(handle)


class HandRun:
    """`bfh_env`'s run: `harness.run.runner.run_loop` with the test's own code as its body."""

    def __init__(
        self,
        topology: Topology,
        reports: Path,
        *,
        backend: str = "local",
        label: str = "run",
        agent_cmd: str | None = None,
        gates: tuple[str, ...] | list[str] = DEFAULT_GATES,
        params: Mapping[str, Any] | None = None,
        on_result: Callable[[RunResult], None] | None = None,
        agent_protocol: str | None = None,
    ) -> None:
        self.agent_protocol = agent_protocol  # the one protocol --agent-cmd speaks, when given
        self.topology, self.reports, self.backend_kind = topology, Path(reports), backend
        self.label, self.agent_cmd, self.on_result = label, agent_cmd, on_result
        self.scenario = {"name": label, "what": "a test's own run", "gates": list(gates), "params": {}}
        self.scenario["params"] = dict(params or {})
        self.agents: list[AgentProcess] = []  # the loop's own list once up (kept after judge())
        self.result: RunResult | None = None
        self._stack = contextlib.ExitStack()
        self._loop: Loop | None = None
        self._faults: FaultHandle | None = None

    # -- up and down -----------------------------------------------------------------------------
    def __enter__(self) -> HandRun:
        loop = self._stack.enter_context(
            run_loop(
                self.topology,
                label=self.label,
                reports=self.reports,
                backend=self.backend_kind,
                scenario=self.scenario,
            )
        )
        self._loop, self.result, self.agents = loop, loop.result, loop.agents
        self._faults = FaultHandle(loop.env.faults)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the agents (recording how they ended) and take the environment down; idempotent."""
        self._loop = None
        self._stack.close()

    @property
    def loop(self) -> Loop:
        if self._loop is None:
            raise RuntimeError("the environment is down (judge() or close() was called)")
        return self._loop

    @property
    def env(self) -> Environment:
        return self.loop.env

    @property
    def run_dir(self) -> Path:
        assert self.result is not None, "use HandRun in a with block"
        return self.result.run_dir

    @property
    def faults(self) -> FaultHandle:
        self.env  # noqa: B018  # raises once the environment is down
        assert self._faults is not None
        return self._faults

    # -- what agents dial ------------------------------------------------------------------------
    @property
    def group(self) -> str:
        """The first master/slave group (the first group when none has two members)."""
        groups = self.topology.groups
        return next((g.name for g in groups if g.size > 1), groups[0].name)

    def mb_urls(self, connector: str = "mqtt", group: str | None = None) -> list[str]:
        return self.env.mb_urls(connector, group or self.group)

    @property
    def urls(self) -> str:
        """`mb.urls` of the first group's MQTT connectors, through the fault proxy."""
        return ",".join(self.mb_urls())

    # -- agents ----------------------------------------------------------------------------------
    def start_agent(
        self, command: str | None = None, *, subscribe_wait_s: float = 60.0, **kw: Any
    ) -> AgentProcess:
        """Launch one agent (the --agent-cmd agent unless `command`; keywords of
        harness.agents.launch.agent_factory: count, rate, protocol, qos, name, ...) and wait for its
        subscriptions."""
        kw.setdefault("group", self.group)
        kw.setdefault("name", f"agent-{len(self.agents) + 1}")
        if command is None and self.agent_protocol:
            kw.setdefault("command_protocol", self.agent_protocol)
        spec = agent_factory(command=command or self.agent_cmd, **kw)(self.env)[0]
        (agent,) = self.loop.launch([spec], subscribe_wait_s=subscribe_wait_s)
        return agent

    def wait_sent(self, n: int, timeout: float = 60.0) -> bool:
        """Until the agents together logged `n` sent (a point mid-traffic to apply a fault)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for a in self.agents:
                a.poll()
            if sum(a.counts["sent"] for a in self.agents) >= n:
                return True
            time.sleep(0.2)
        return False

    # -- the verdict -----------------------------------------------------------------------------
    def judge(self, settle_s: float = 8.0, timeout: float = 300.0) -> Verdict:
        """Wait for the publications, heal every fault, settle, stop, take the environment down,
        reconcile and judge (harness.verdict): the verdict a catalog entry would get."""
        assert self.result is not None, "use HandRun in a with block"
        result, loop = self.result, self.loop
        # an empty schedule: the loop follows the publishing, then heals what the test left open
        loop.drive(Schedule(steps=[]), show=False, timeout=timeout)
        loop.settle(settle_s)
        self.close()
        result.verdict = judge_run(result.run_dir)
        result.summary = result.verdict_summary()
        if self.on_result is not None:
            self.on_result(result)
        return result.verdict


def judge_run(run_dir: Path, gates: list[str] | None = None) -> Verdict:
    """Reconcile, judge, report and seal a run folder: the runs' one tail (harness.run.runner.finish);
    `gates` judges it again with those promises gated."""
    from harness.verdict import judge

    (verdict,) = finish([Path(run_dir)], policy=CATALOG_POLICY)
    return verdict if gates is None else judge(Path(run_dir), gates)
