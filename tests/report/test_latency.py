"""The latency histogram is drawn from summary.json's quarter-decade bins (no per-pair rows)."""

from __future__ import annotations

import re

from harness.report.html import latency_svg


def _bars(svg: str) -> dict[str, int]:
    return {m[0]: int(m[1]) for m in re.findall(r"<title>([^<]+) s: (\d+)</title>", svg)}


def test_bins_become_bars_with_their_counts() -> None:
    # bin -8: [10^-2, 10^-1.75) s; bin 4: [10^1, 10^1.25) s
    bars = _bars(str(latency_svg([[-8, 5], [4, 2]])))
    assert sum(bars.values()) == 7
    assert bars["0.01–0.0178"] == 5 and bars["10–17.8"] == 2
    assert len(bars) == (2 + 3) * 4  # 1 ms .. 100 s: the axis ends at the decade above the largest bin


def test_short_latencies_fall_in_the_first_bar_and_none_is_said() -> None:
    bars = _bars(str(latency_svg([[-40, 3], [-12, 1]])))
    assert bars["0.001–0.00178"] == 4
    assert "no receipts" in str(latency_svg([])) and "no receipts" in str(latency_svg([[0, 0]]))
