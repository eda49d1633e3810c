"""Issue 60 item 6: `bfh judge` always ends. Run folders generated from a real one (the masterslave
rejudge fixture, already reconciled): no sends, no receipts, a consumer that never goes away, an
agent that never disconnects, clocks out of order; each judged in its own process, which must
return (any verdict, or one error line) within DEADLINE_S. `FUZZ_EXAMPLES` sets the examples
(default 8)."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FIXTURE = Path(__file__).parents[1] / "fixtures" / "rejudge" / "20261126-144907-masterslave-fb73"
DEADLINE_S = 10.0
CASES = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "8")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
SENDS = ("sent", "send_attempt", "dropped")
LETS_GO = ("disconnected",)


def _read(p: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]


def _write(p: Path, rows: list[dict[str, Any]]) -> None:
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))


def make_folder(root: Path, case: dict[str, Any]) -> Path:
    """The fixture's copy, changed as `case` says, with no manifest (a folder from before them:
    judged, not refused for its changed evidence)."""
    d = Path(shutil.copytree(FIXTURE, root / FIXTURE.name))
    (d / "manifest.json").unlink(missing_ok=True)
    run = json.loads((d / "run.json").read_text())
    run.pop("manifest", None)
    if case["no_observations"]:  # no run window: any plausible time is the run's
        run["observations"] = {k: v for k, v in run.get("observations", {}).items() if not k.endswith("_ts")}
    (d / "run.json").write_text(json.dumps(run))
    rng = random.Random(case["seed"])
    for log in d.glob("agents/*/messages.jsonl"):
        rows = _read(log)
        if case["no_sends"]:
            rows = [r for r in rows if r.get("event") not in SENDS]
        if case["no_receipts"]:
            rows = [r for r in rows if r.get("event") != "received"]
        if case["never_disconnects"]:
            rows = [r for r in rows if r.get("event") not in LETS_GO]
        if case["skew_s"]:  # some records on a clock that disagrees
            for r in rows:
                if rng.random() < 0.3:
                    r["ts"] = float(r["ts"]) + case["skew_s"]
        if case["shuffle"]:
            rng.shuffle(rows)
        _write(log, rows)
    events = d / "brokers" / "events.jsonl"
    rows = _read(events)
    if case["consumer_stays"]:
        rows = [r for r in rows if r.get("event") not in ("consumer_removed", "connection_removed")]
    if case["shuffle"]:
        rng.shuffle(rows)
    _write(events, rows)
    return d


def judge_in_time(d: Path) -> subprocess.CompletedProcess[str]:
    """`bfh judge DIR` in its own process, killed at DEADLINE_S (a hang fails, never blocks)."""
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "judge", str(d)],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
    )


CASE = st.fixed_dictionaries(
    {
        "no_sends": st.booleans(),
        "no_receipts": st.booleans(),
        "never_disconnects": st.booleans(),
        "consumer_stays": st.booleans(),
        "no_observations": st.booleans(),
        "shuffle": st.booleans(),
        "skew_s": st.sampled_from([0.0, -3600.0, -30.0, 45.0, 86400.0 * 365]),
        "seed": st.integers(0, 2**16),
    }
)


def _judged(d: Path) -> None:
    out = judge_in_time(d)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode in (0, 1, 2), out.stderr


def test_no_sends_and_a_consumer_that_never_goes_away_ends(tmp_path: Path) -> None:
    """The hang of issue 60: no sends (traffic_end 0.0), an open subscription, its consumer held."""
    case = dict.fromkeys(("no_receipts", "no_observations", "shuffle"), False)
    case.update(no_sends=True, never_disconnects=True, consumer_stays=True, skew_s=0.0, seed=0)
    _judged(make_folder(tmp_path, case))


@CASES
@given(case=CASE)
def test_bfh_judge_returns_on_every_generated_folder(tmp_path_factory: Any, case: dict[str, Any]) -> None:
    root = tmp_path_factory.mktemp("judge-ends")
    _judged(make_folder(root, case))
