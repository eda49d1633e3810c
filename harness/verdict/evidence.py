"""The `evidence` check: the run folder's logs are this run's and agree with its reconciliation.

Always gated (a run judged on evidence that is not its own proves nothing). It fails when
- records name another run (`run` field): they are left out of every checker and counted here;
- records carry a `ts` that is not a finite time inside the run's window (harness/contracts/manifest.py
  `run_window`: milliseconds, NaN, inf, a year 2286): malformed, left out and counted here;
- the logs hold fewer acknowledged messages than summary.json counts, or another number of
  receipts (`totals.receipts`): the summary was reconciled from other logs than these.
"""

from __future__ import annotations

from typing import Any

from harness.verdict.checks.base import EXAMPLES, Check
from harness.verdict.view import RunView

PROMISE = "evidence"
WHAT = "every record is this run's, timed inside its window, and the logs hold what summary.json counts"


def _mine(r: dict[str, Any]) -> bool:
    return r.get("agent") is not None and r.get("msg_id") is not None


def check(v: RunView) -> Check:
    bad: list[dict[str, Any]] = []
    foreign = sum(v.foreign.values())
    if foreign:
        runs = ", ".join(f"{k[:60]!r}×{n}" for k, n in sorted(v.foreign_runs.items())[:3])
        agents = ", ".join(sorted(v.foreign))
        bad.append(
            {"what": f"{foreign} record(s) of another run ({runs}) in the logs of {agents}: not counted"}
        )
    bad_ts = sum(v.bad_ts.values())
    if bad_ts:
        bad.append(
            {
                "what": f"{bad_ts} record(s) whose ts is not a finite Unix time inside the run's window "
                f"(in {', '.join(sorted(v.bad_ts))}): malformed, not counted"
            }
        )
    totals = v.summary.get("totals") or {}
    sent: set[str] = set()
    received = 0
    for recs in v.records.values():
        for r in recs:
            ev = r.get("event")
            if ev == "sent" and _mine(r):
                sent.add(str(r["msg_id"]))
            elif ev == "received" and _mine(r) and r.get("subscription") is not None:
                received += 1
    acknowledged = totals.get("acknowledged")
    mismatch = 0
    if isinstance(acknowledged, int) and acknowledged > len(sent):
        mismatch += 1
        bad.append(
            {
                "what": f"summary.json counts {acknowledged} acknowledged messages, the logs hold "
                f"{len(sent)}: it was not reconciled from these logs"
            }
        )
    receipts = totals.get("receipts")
    if isinstance(receipts, int) and receipts != received and not (foreign or bad_ts):
        mismatch += 1
        bad.append(
            {
                "what": f"summary.json counts {receipts} receipts, the logs hold {received}: "
                "it was not reconciled from these logs"
            }
        )
    if not bad:
        return Check(PROMISE)
    examples = [e for e in v.examples if e.get("what")][: EXAMPLES - len(bad)] if len(bad) < EXAMPLES else []
    return Check(
        PROMISE,
        "fail",
        foreign + bad_ts + mismatch,
        bad + examples,
        None,
        "evidence that is not this run's: " + "; ".join(b["what"] for b in bad),
    )
