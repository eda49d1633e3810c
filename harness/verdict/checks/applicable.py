"""Whether the run can judge the agent at all: an agent that takes host:port only (as the Stratos
agent's mb.urls does) exits on a TLS topology's ssl:// URLs before doing anything; its promises
are then not applicable (`n/a`), not broken.

Decided from the run's own records, never from the agent's console output: run.json says which
agents exited early, with which exit code, and which URLs each was given; the agent's message log
says whether it ever connected or logged anything at all.
"""

from __future__ import annotations

from typing import Any

from harness.verdict.checks.base import Check
from harness.verdict.view import RunView

PROMISE = "applicable"
#: URL schemes an agent may lack (the plain host:port form has none)
OPTIONAL_SCHEMES = ("ssl", "tls", "mqtts", "stomp+ssl", "wss")


def refused(v: RunView) -> list[dict[str, Any]]:
    """The agents that exited early, unsuccessfully, having logged nothing, while their mb.urls
    held a scheme they may not support; empty unless every agent of the run did so."""
    early = [str(a) for a in v.observations.get("agents_exited_early") or []]
    codes = v.observations.get("agent_exit") or {}
    out = []
    for agent in early:
        schemes = sorted({u.split("://")[0].lower() for u in v.urls(agent) if "://" in u})
        named = [s for s in schemes if s in OPTIONAL_SCHEMES]
        code = codes.get(agent)
        if named and not v.records.get(agent) and code not in (0, None):
            out.append(
                {
                    "agent": agent,
                    "what": f"{agent} exited (code {code}) without connecting or logging anything, "
                    f"refusing the {', '.join(named)}:// URLs of its mb.urls",
                }
            )
    return out if out and len(out) == len(v.agents or early) else []


def applicable(v: RunView) -> Check:
    """`pass` when the run judges the agent, `n/a` (with the refusal as evidence) when not."""
    out = refused(v)
    if not out:
        return Check(PROMISE)
    return Check(PROMISE, "n/a", len(out), out, None, "; ".join(e["what"] for e in out))
