"""The report of a fleet reads at a thousand (issue 44 item 6): on a generated 1,000-member
run folder (tests/report/fleetfolder.py), `bfh judge` then `bfh report` write a report.html
under 5 MB whose fleet section aggregates first (the recovery distribution, the storm's peak,
when every member was back, connections per broker over time, the brokers' connections and
CPU), names the 10 slowest members with their evidence, and folds per-member detail away. Its
load time in Chromium is a benchmark figure (benchmarks/bench_report.py), not an assertion."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from .fleetfolder import write_fleet_folder

REPO = Path(__file__).resolve().parents[2]
BFH = str(REPO / ".venv" / "bin" / "bfh")
MAX_BYTES = 5_000_000


def test_a_thousand_member_report_aggregates_first_and_stays_small(tmp_path: Path) -> None:
    run_dir = tmp_path / "20990101-000000-fleet-masterslave-1000"
    write_fleet_folder(run_dir, members=1000)
    judged = subprocess.run([BFH, "judge", str(run_dir)], capture_output=True, text=True, timeout=300)
    assert judged.returncode == 0, judged.stdout[-1500:] + judged.stderr[-1500:]
    made = subprocess.run([BFH, "report", str(run_dir)], capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-2000:]
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert len(html.encode()) < MAX_BYTES
    # the aggregates come first, in this order, before any per-member detail
    order = [
        'id="fleet-aggregate"',
        'id="fleet-recovery"',
        "id='fleet-slowest'",
        'id="fleet-connections"',
        'id="fleet-members"',
        'id="broker-usage"',
        "<summary>Timeline of the controllers and the slowest members",
    ]
    at = [html.find(x) for x in order]
    assert -1 not in at and at == sorted(at), dict(zip(order, at, strict=True))
    aggregate = html[at[0] : at[1]]
    assert "1000 (2000 roles)" in aggregate and "p50" in aggregate and "p95" in aggregate
    assert re.search(r"storm peak</th><td>\d+ reconnects/s", aggregate), aggregate
    assert "f001-kill: " in aggregate and "after its end" in aggregate
    # the 10 slowest by name, each with its log and the evidence of its loss and return
    slowest = html[at[2] : at[3]]
    names = re.findall(r"<a href='agents/(fleet-pair-\d+)/messages.jsonl'>", slowest)
    assert len(names) == 10 and "fleet-pair-1000" in names, names
    assert slowest.count("lost 17") == 10
    # per-member detail is folded: the member table, the subscriptions, the files; none outside
    folded = html[at[4] : html.index("</details>", at[4])]
    assert folded.count("<tr><td>fleet-pair-") == 1000
    unfolded = re.sub(r"<details.*?</details>", "", html, flags=re.S)
    assert set(re.findall(r"fleet-pair-\d+", unfolded)) <= set(names)  # only the slowest are named
    # the brokers' chart per broker; the timeline draws 2 controllers + 10 members, not 1000 lanes
    assert html.count('class="broker-usage"') == 2
    assert "(12 agents)</summary>" in html
