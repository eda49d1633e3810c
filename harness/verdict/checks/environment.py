"""Promises about the run as a whole: bridges, agent exits, the faults themselves, secrets."""

from __future__ import annotations

import re
from typing import Any

from harness.verdict.checks.base import (
    BROKER_OUTAGES,
    EXAMPLES,
    HEALS,
    Check,
    bound,
    not_applicable,
    verdict_of,
)
from harness.verdict.view import RunView
from harness.witness.brokerlog import line_ts

BRIDGE_BACKOFF_S = 10.0  # a bridge retries with backoff after its links come back
BRIDGE_FAILURE = re.compile(
    r"Could not (start|connect) network bridge|Network connection between .* shut ?down"
)


def bridge_health(v: RunView) -> Check:
    if not any(lk.get("kind") == "bridge" for lk in v.run.get("links") or []):
        return not_applicable("bridge_health", "no network bridge")
    limit = bound(v, "bridge_failures_max")
    # A fault on the bridges themselves makes them fail while it lasts (and through their reconnect
    # backoff after): that is the fault working, not a bridge that cannot find its broker.
    bridge_links = {str(lk.get("name")) for lk in v.run.get("links") or [] if lk.get("kind") == "bridge"}
    cut = [
        w
        for w in v.faults
        if {"bridges", *bridge_links} & set(w.target.split(",")) or w.target.startswith("bridge:")
    ]
    # So does a group with every member down: bridges to it have nothing to connect to.
    down = _group_outages(v)
    takeover = _Takeovers(v)
    bad = [
        {"broker": b, "ts": ts, "what": line[:240]}
        for b, lines in v.broker_logs.items()
        for line in lines
        if BRIDGE_FAILURE.search(line)
        and not (
            (ts := line_ts(line)) is not None
            and (
                any(w.covers(ts, 0.5, BRIDGE_BACKOFF_S) for w in cut)
                or any(lo - 0.5 <= ts <= hi + BRIDGE_BACKOFF_S for lo, hi in down)
                or takeover.excuses(b, line, ts)
            )
        )
    ]
    if len(bad) <= limit:
        return Check("bridge_health", count=len(bad), detail=f"{len(bad)} bridge failures (limit {limit:g})")
    return Check(
        "bridge_health",
        "fail",
        len(bad),
        bad[:EXAMPLES],
        None,
        f"bridges failed to connect {len(bad)} times (limit {limit:g}): a bridge keeps retrying a broker "
        "that cannot serve (static:(master,slave) to a pair? use masterslave:)",
    )


def _group_outages(v: RunView) -> list[tuple[float, float]]:
    """(start, back) of every moment a whole group was down: all its members killed, stopped or
    paused within a second of each other, until the first of them was started (or resumed) again."""
    out = []
    for members in v.groups.values():
        downs = [w for w in v.faults if w.target in members and w.fault in BROKER_OUTAGES]
        for w in downs:
            if set(members) <= {x.target for x in downs if abs(x.start - w.start) <= 1.0}:
                back = [
                    x.start
                    for x in v.faults
                    if x.fault in HEALS and x.target in members and x.start >= w.start
                ]
                out.append((w.start, min(back) if back else (w.end if w.end is not None else w.start)))
    return out


_OUTBOUND = re.compile(r"tcp://[^/\s:]+:(\d+)")  # a bridge's own connection (inbound: tcp:///ip:port@port)
_BRIDGE_LINK = re.compile(r"^bridge-(?P<src>.+)-to-(?P<dst>.+)$")


class _Takeovers:
    """A group whose master was killed or stopped has no master until a slave takes over (the
    fault's `new_master`): bridges to it fail meanwhile, and through their backoff after. Only
    failures toward that group are excused, so a static:(master,slave) bridge that keeps failing on
    another group's slave (seed 002) still counts."""

    def __init__(self, v: RunView) -> None:
        self.group_of = {m: g for g, ms in v.groups.items() for m in ms}
        self.windows: dict[str, list[tuple[float, float]]] = {}
        for w in v.faults:
            if w.params.get("new_master") and w.end is not None:
                g = str(w.params.get("group") or self.group_of.get(w.target, ""))
                self.windows.setdefault(g, []).append((w.start - 0.5, w.end + BRIDGE_BACKOFF_S))
        self.port_group: dict[str, str] = {}
        self.targets: dict[str, set[str]] = {}  # bridge source broker -> groups its bridges reach
        for lk in v.run.get("links") or []:
            if lk.get("kind") != "bridge":
                continue
            dst = self.group_of.get(str(lk.get("broker")), "")
            self.port_group[str(lk.get("listen", "")).rsplit(":", 1)[-1]] = dst
            m = _BRIDGE_LINK.match(str(lk.get("name", "")))
            if m:
                self.targets.setdefault(m["src"], set()).add(dst)

    def _during(self, group: str, ts: float) -> bool:
        return any(lo <= ts <= hi for lo, hi in self.windows.get(group, ()))

    def excuses(self, broker: str, line: str, ts: float) -> bool:
        if not self.windows:
            return False
        m = _OUTBOUND.search(line)
        if m and m[1] in self.port_group:  # the line names the group it tried
            return self._during(self.port_group[m[1]], ts)
        # no target named ("unconnected", an inbound connection): the logging broker's own group
        # changing master, or every group its bridges reach doing so
        reach = self.targets.get(broker) or {""}
        return self._during(self.group_of.get(broker, ""), ts) or all(self._during(g, ts) for g in reach)


def clean_exit(v: RunView) -> Check:
    """Agents neither crash nor hang: each runs until told to stop and exits 0 on SIGTERM."""
    codes = v.observations.get("agent_exit") or {}
    if not codes:
        return not_applicable("clean_exit", "no agent exit recorded")
    bad = [{"agent": a, "what": f"exit status {c}"} for a, c in sorted(codes.items()) if c != 0]
    return verdict_of("clean_exit", bad, "an agent crashed or did not stop on SIGTERM")


def faults_applied(v: RunView) -> Check:
    """The harness's own promise: every fault step took effect as the scenario meant."""
    bad: list[dict[str, Any]] = [
        {"what": f"fault step failed: {e}"} for e in v.observations.get("nemesis_errors") or []
    ]
    want = v.params.get("expect_takeovers")
    if want:
        got = {w.params.get("new_master") for w in v.faults if w.params.get("new_master")}
        if len(got) < int(want):
            bad.append({"what": f"{len(got)} distinct brokers took over, the scenario needs {want}"})
    for w in v.faults:  # a fault the harness never healed (or whose end was lost): not what ran
        if w.end is None:
            bad.append(
                {
                    "ts": w.start,
                    "fault": w.fault_id,
                    "what": f"{w.fault_id} started and never ended (no fault_end)",
                }
            )
    want_cuts = v.params.get("expect_cuts")
    if want_cuts:
        cuts = sum(1 for w in v.faults if w.fault == "sever")
        if cuts < int(want_cuts):
            bad.append({"what": f"{cuts} connections severed, the scenario needs {want_cuts} (one per role)"})
    return verdict_of("faults_applied", bad, "the schedule did not do what the scenario needs")


def no_secret_leak(v: RunView) -> Check:
    """No password of an agent.conf appears in a log, report, run.json or analysis output."""
    secrets: set[str] = set()
    for conf in v.run_dir.glob("agents/*/agent.conf"):
        if not conf.is_file():  # a FIFO would block
            continue
        for line in conf.read_text(errors="replace").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "mb.password" and value.strip():
                secrets.add(value.strip())
    if not secrets:
        return not_applicable("no_secret_leak", "no credentials")
    bad = []
    for f in v.run_dir.rglob("*"):
        rel = f.relative_to(v.run_dir)
        if not f.is_file() or "conf" in rel.parts[:3] or f.name in ("agent.conf", "password"):
            continue
        if f.suffix in (".p12", ".pem", ".parquet", ".crc") or "kahadb" in f.parts:
            continue
        if any(s in f.read_text(errors="replace") for s in secrets):
            bad.append({"what": f"a password written to {rel}"})
    return verdict_of("no_secret_leak", bad, "credentials leaked into run output")
