"""`bfh topology validate` of generated chains of 100, 200 and 500 groups (tests/topology/generate.py):
wall time of the CLI and of the prediction alone, and how many warning lines it prints.

    .venv/bin/python benchmarks/bench_topology.py [100 200 500]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.topology import parse_topology  # noqa: E402
from harness.topology.paths import grouped_warnings, predict, predict_traffic  # noqa: E402
from tests.topology.generate import chain  # noqa: E402


def main(sizes: list[int]) -> None:
    for n in sizes:
        data = chain(n)
        t0 = time.monotonic()
        t = parse_topology(data, "chain")
        grouped_warnings(predict(t)) + grouped_warnings(predict_traffic(t))
        predicted = time.monotonic() - t0
        with tempfile.TemporaryDirectory() as d:
            f = Path(d) / f"chain-{n}.yaml"
            f.write_text(yaml.safe_dump(data))
            t0 = time.monotonic()
            p = subprocess.run(
                [sys.executable, "-m", "harness.cli.main", "topology", "validate", str(f)],
                capture_output=True,
                text=True,
                check=False,
            )
            cli = time.monotonic() - t0
        lines = len(p.stderr.splitlines())
        print(
            f"{n} groups: prediction {predicted:.2f} s, "
            f"bfh topology validate {cli:.2f} s (exit {p.returncode}), {lines} lines"
        )


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [100, 200, 500])
