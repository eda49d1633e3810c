"""Packed members: the harness's own agent, many fleet members per process (docs/fleet.md).

A member keeps everything of the agent contract but the process: agents/<agent>/agent.conf,
workload.json and messages.jsonl where a process member has them, and its own AgentProcess (the
pack's process shared). Only the harness's own agents pack (the reference, a seeded defect: the
command `{python} -m <module> --config {config} --workload {workload} --log {log}`); an agent
team's command runs one process per member. The pack's members.json and agent.out are in
packs/<first member>/.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from pathlib import Path

from harness import procs
from harness.agents.launch import AgentProcess, AgentSpec, launch_agent, write_inputs

_OWN_AGENT = re.compile(
    r"\{python\} -m (agent_under_test\.(?:reference|defects\.\w+)) "
    r"--config \{config\} --workload \{workload\} --log \{log\}"
)
PACK_MODULE = "agent_under_test.reference.packed"
#: members per process at most: paho's loop waits in select(), which takes no descriptor past
#: 1023, and a member holds up to 10 (its log; its subscriber's and publisher's connections and
#: a probe's, each with paho's wake-up socket pair)
PACK_CAP = 50
PACK_ENV = "BFH_FLEET_PACK"
#: a fleet past this many members runs packed unless BFH_FLEET_PACK says otherwise: a member
#: process costs ~36 MB (a thousand: 36 GB), a packed member ~1 MB (docs/fleet.md)
PACK_FROM = 100


def agent_module(command: str) -> str | None:
    """The module of a harness-owned agent command (one that can be packed), else None."""
    m = _OWN_AGENT.fullmatch(command.strip())
    return m.group(1) if m else None


def pack_size(members: int, cores: int | None = None) -> int:
    """Members per process for a fleet of `members`: BFH_FLEET_PACK when set (0 or 1: a process
    per member), else past PACK_FROM members spread over the cores, at most PACK_CAP per process."""
    env = os.environ.get(PACK_ENV, "").strip()
    if env:
        return max(0, min(int(env), PACK_CAP))
    if members <= PACK_FROM:
        return 0
    cores = cores or os.cpu_count() or 1
    return max(1, min(PACK_CAP, math.ceil(members / cores)))


def launch_packed(specs: list[AgentSpec], run_dir: Path, run_id: str) -> list[AgentProcess]:
    """One process per `spec.pack` members (specs of one agent module, in order)."""
    out: list[AgentProcess] = []
    size = max(1, specs[0].pack) if specs else 1
    for start in range(0, len(specs), size):
        chunk = specs[start : start + size]
        module = agent_module(chunk[0].command)
        if module is None or any(agent_module(s.command) != module for s in chunk):
            raise ValueError(f"not one packable agent command: {chunk[0].command!r}")
        files = [write_inputs(s, run_dir, run_id) for s in chunk]
        pdir = run_dir / "packs" / chunk[0].name
        pdir.mkdir(parents=True, exist_ok=True)
        members = pdir / "members.json"
        members.write_text(
            json.dumps([{"config": str(c), "workload": str(w), "log": str(lg)} for c, w, lg in files]),
            encoding="utf-8",
        )
        argv = [sys.executable, "-m", PACK_MODULE, "--members", str(members), "--module", module]
        proc = procs.spawn(
            f"pack-{chunk[0].name}", argv, pdir / "agent.out", cwd=Path.cwd(), pid_dir=run_dir / "pids"
        )
        out += [AgentProcess(s, lg.parent, lg, proc) for s, (_c, _w, lg) in zip(chunk, files, strict=True)]
    return out


def launch_all(specs: list[AgentSpec], run_dir: Path, run_id: str) -> list[AgentProcess]:
    """Launch specs in order: packed ones (pack > 1, a packable command) grouped by command into
    packs, the others one process each (harness.agents.launch.launch_agent)."""
    out: list[AgentProcess] = []
    groups: dict[str, list[AgentSpec]] = {}
    for s in specs:
        if s.pack > 1 and agent_module(s.command):
            groups.setdefault(s.command, []).append(s)
        else:
            out.append(launch_agent(s, run_dir, run_id))
    for group in groups.values():
        out += launch_packed(group, run_dir, run_id)
    return out
