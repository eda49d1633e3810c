"""The plugin's options: only `--bfh-*` on the command line, each with an ini twin (`bfh_agent_cmd =
...` in pytest.ini or pyproject's `[tool.pytest.ini_options]`); the command line wins over the ini.

`settings(config)` reads them once into `config.stash` (a frozen Settings): the plugin's hooks and
fixtures read that, never a module global.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass(frozen=True)
class Option:
    name: str  # the dest and ini name; the option is `--` + name with `-`
    help: str
    default: Any = None
    choices: tuple[str, ...] | None = None
    kind: str = "str"  # str | int | size (>= 1) | count (>= 0) | flag

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


OPTIONS: tuple[Option, ...] = (
    Option(
        "bfh_agent_cmd",
        "gate this agent: command template with {config} {workload} {log}; adds the conformance "
        "catalog (select with -k or --bfh-scenarios)",
    ),
    Option(
        "bfh_agent_cmd_only",
        "the agent command for every scenario and fixture, without adding the catalog "
        "(default: the reference agent)",
    ),
    Option("bfh_scenarios", "comma-separated catalog entries to run (`bfh run --list`); adds the catalog"),
    Option("bfh_catalog", "add the conformance catalog to the session", False, kind="flag"),
    Option(
        "bfh_backend",
        "broker backend: local (default), docker, or swarm (a fleet's members as a swarm service)",
        "local",
        ("local", "docker", "swarm"),
    ),
    Option("bfh_reports", "folder for run folders and the session report (default: reports/)", "reports"),
    Option(
        "bfh_gate",
        "anomalies that fail a scenario: all or agent (only those blamed on the agent, and the "
        "unknown; broker findings and races are listed as warnings); default: agent when an agent "
        "command is gated (--bfh-agent-cmd/-only), all for the reference agent and --bfh-topology; "
        "saved in run.json",
        None,
        ("all", "agent"),
    ),
    Option(
        "bfh_topology",
        "validate this topology (file or built-in name): one test per fault row of its coverage "
        "matrix, traffic on every delivery path (bfh validate's rows)",
    ),
    Option("bfh_faults", "with --bfh-topology: comma-separated fault rows only (baseline, kill, pause, ...)"),
    Option(
        "bfh_fleet",
        "agents per group of the fleet entries (-k fleet): the agent command runs as N processes, "
        "Stratos-shaped (docs/fleet.md); with --bfh-topology, N subscribers per group",
        kind="size",
    ),
    Option(
        "bfh_rounds",
        "run each catalog scenario N times (another seed each round); report failures of N and "
        "the 95 %% upper bound on the failure probability (JUnit properties, reports/rounds-*.json)",
        1,
        kind="size",
    ),
    Option(
        "bfh_rerun_unknown",
        "run a catalog scenario (or round) whose verdict is unknown (inconclusive: a checker crashed, "
        "or the machine's overload explains a timing breach) again, up to N times; still unknown, it "
        "fails as inconclusive (default 1; 0: no re-run)",
        1,
        kind="count",
    ),
    Option(
        "bfh_unknown",
        "what a still-inconclusive scenario is: fail (default) or skip (exit 0; the summary counts them)",
        "fail",
        ("fail", "skip"),
    ),
    Option(
        "bfh_agent_check",
        "first check this agent command against docs/agent-contract.md (a healthy pair, a kill, a "
        "cut: about a minute); contract errors stop the session (exit 1), could not run: exit 2",
    ),
    Option(
        "bfh_agent_protocol",
        "protocol of the agent command: its workload and mb.urls use this connector "
        "(default: each scenario's own, MQTT unless it says otherwise)",
        None,
        ("mqtt", "stomp", "openwire"),
    ),
    Option(
        "bfh_scorecard",
        "write the session's scorecard (bfh-scorecard/1: every round's promises and measures, "
        "docs/compare.md) here; default: <bfh_reports>/scorecard.json; `none`: do not write one",
    ),
    Option("bfh_agent_version", "the agent release's version, recorded in the scorecard (e.g. 2.4.1)", ""),
    Option(
        "bfh_baseline",
        "compare this session's scorecard with this one (the last release's) and fail the session "
        "(exit 1) on a regression (bfh compare's statistics; with --bfh-rounds N)",
    ),
)
BY_NAME = {o.name: o for o in OPTIONS}


def _size(text: str) -> int:
    n = int(text)
    if n < 1:
        raise ValueError(text)
    return n


def _count(text: str) -> int:
    n = int(text)
    if n < 0:
        raise ValueError(text)
    return n


PARSE = {"size": (_size, "a whole number of at least 1"), "count": (_count, "a whole number of at least 0")}


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("bfh", "broker-failover harness")
    for o in OPTIONS:
        # default None on the command line: "not given", so the ini twin can fill it in
        kw: dict[str, Any] = {"dest": o.name, "help": o.help + f" (ini: {o.name})"}
        if o.kind == "flag":
            kw.update(action="store_true", default=None)
        else:
            kw.update(default=None, choices=o.choices, type=PARSE[o.kind][0] if o.kind in PARSE else None)
        g.addoption(o.flag, **kw)
        parser.addini(o.name, o.help.replace("%%", "%"), type="bool" if o.kind == "flag" else "string")


@dataclass(frozen=True)
class Settings:
    """The options as resolved for this session (command line over ini over default)."""

    agent_cmd: str | None  # --bfh-agent-cmd: adds the catalog
    agent: str | None  # the one agent command of every scenario and fixture (either option)
    scenarios: tuple[str, ...]
    catalog: bool
    backend: str
    reports: str
    gate: str
    topology: str | None
    faults: tuple[str, ...] | None
    fleet: int | None
    rounds: int
    agent_protocol: str | None
    agent_check: str | None = None  # --bfh-agent-check: the contract check before the suite
    scorecard: str | None = None  # --bfh-scorecard: the path (None: not written)
    agent_version: str = ""  # --bfh-agent-version
    baseline: str | None = None  # --bfh-baseline: the scorecard to compare with
    rerun_unknown: int = 1  # --bfh-rerun-unknown: re-runs of an unknown verdict (harness.run.rounds)
    unknown: str = "fail"  # --bfh-unknown: an inconclusive scenario fails, or is skipped (counted)


SETTINGS = pytest.StashKey[Settings]()


def _value(config: pytest.Config, o: Option) -> Any:
    given = config.getoption(o.name, None)
    if given is not None:
        return given
    ini = config.getini(o.name)
    if o.kind == "flag":
        return bool(ini)
    if not ini:
        return o.default
    text = str(ini).strip()
    if o.choices and text not in o.choices:
        raise pytest.UsageError(f"ini {o.name} = {text!r}: choose from {', '.join(o.choices)}")
    if o.kind in PARSE:
        parse, what = PARSE[o.kind]
        try:
            return parse(text)
        except ValueError:
            raise pytest.UsageError(f"ini {o.name} = {text!r}: {what}") from None
    return text


def _split(text: str | None) -> tuple[str, ...]:
    return tuple(n.strip() for n in (text or "").split(",") if n.strip())


def _gate(gate: str | None, agent: str | None, topology: str | None) -> str:
    """The gate asked for; else `agent` for a gated agent command, `all` for the reference agent
    and for a topology's validation (the broker is the thing under test there)."""
    from harness.verdict.races import default_gate

    return default_gate(gate, None if topology else agent)


def _scorecard_path(given: str | None, reports: str) -> str | None:
    if given and given.strip().lower() == "none":
        return None
    return given or os.path.join(reports, "scorecard.json")


def settings(config: pytest.Config) -> Settings:
    """The session's Settings, read on first use and kept in config.stash."""
    if SETTINGS in config.stash:
        return config.stash[SETTINGS]
    v = {o.name: _value(config, o) for o in OPTIONS}
    both = {v["bfh_agent_cmd"], v["bfh_agent_cmd_only"]} - {None}
    if len(both) > 1:
        raise pytest.UsageError("--bfh-agent-cmd and --bfh-agent-cmd-only name different agents; give one")
    s = Settings(
        agent_cmd=v["bfh_agent_cmd"],
        agent=next(iter(both), None),
        scenarios=_split(v["bfh_scenarios"]),
        catalog=bool(v["bfh_catalog"]),
        backend=str(v["bfh_backend"]),
        reports=str(v["bfh_reports"]),
        gate=_gate(v["bfh_gate"], next(iter(both), None), v["bfh_topology"]),
        topology=v["bfh_topology"],
        faults=_split(v["bfh_faults"]) or None,
        fleet=v["bfh_fleet"],
        rounds=int(v["bfh_rounds"]),
        agent_protocol=v["bfh_agent_protocol"],
        agent_check=v["bfh_agent_check"],
        scorecard=_scorecard_path(v["bfh_scorecard"], str(v["bfh_reports"])),
        agent_version=str(v["bfh_agent_version"] or ""),
        baseline=v["bfh_baseline"],
        rerun_unknown=int(v["bfh_rerun_unknown"]),
        unknown=str(v["bfh_unknown"]),
    )
    config.stash[SETTINGS] = s
    return s


# -- deprecated spellings (this checkout's conftest.py declares them) ----------------------------
DEPRECATED = "bfh_deprecated_spellings"


def _alias_action(new: str) -> type[argparse.Action]:
    class Alias(argparse.Action):
        """Stores into the bfh option's dest and notes the old spelling (warned at configure)."""

        def __call__(
            self, parser: Any, namespace: argparse.Namespace, values: Any, option_string: str | None = None
        ) -> None:
            setattr(namespace, self.dest, values)
            used = getattr(namespace, DEPRECATED, None) or []
            if (option_string, new) not in used:  # pytest parses the arguments more than once
                setattr(namespace, DEPRECATED, [*used, (option_string, new)])

    return Alias


def add_deprecated_alias(parser: pytest.Parser, old: str, new: str) -> None:
    """`old` (e.g. `--agent-cmd`) sets the bfh option `new` (e.g. `--bfh-agent-cmd-only`)."""
    o = BY_NAME[new.removeprefix("--").replace("-", "_")]
    kw: dict[str, Any] = {"dest": o.name, "default": None, "choices": o.choices}
    parser.getgroup("bfh").addoption(old, action=_alias_action(new), help=f"deprecated: use {new}", **kw)


def warn_deprecated(config: pytest.Config) -> list[str]:
    """A deprecation warning per old spelling given (by the controller only, not each xdist
    worker again); returns the messages."""
    if hasattr(config, "workerinput"):
        return []
    used = getattr(config.option, DEPRECATED, None) or []
    msgs = [f"{old} is deprecated: use {new}" for old, new in used]
    for m in msgs:
        config.issue_config_time_warning(pytest.PytestDeprecationWarning(m), stacklevel=2)
    return msgs
