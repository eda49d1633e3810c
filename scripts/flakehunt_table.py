"""The flake hunt's table: JUnit XML files of repeated pytest runs -> markdown, test x runs x failures.

Usage: python scripts/flakehunt_table.py LABEL ROUND.xml... (scripts/flakehunt.sh calls it).
Every failure keeps its first error line, with the round it came from.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:240]
    return "(no message)"


def collect(paths: list[Path]) -> tuple[dict[str, int], dict[str, list[str]]]:
    """Runs and failures (first error lines) per test id, over every round's JUnit XML."""
    runs: dict[str, int] = defaultdict(int)
    failures: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        try:
            root = ET.parse(path).getroot()
        except (ET.ParseError, OSError) as e:
            failures[f"(round {path.stem})"].append(f"no JUnit XML: {e}")
            continue
        for case in root.iter("testcase"):
            cls, name = case.get("classname", ""), case.get("name", "")
            test = f"{cls.replace('.', '/')}.py::{name}" if cls else name
            if case.find("skipped") is not None:
                continue
            runs[test] += 1
            for tag in ("failure", "error"):
                bad = case.find(tag)
                if bad is not None:
                    failures[test].append(f"{path.stem}: {first_line(bad.get('message') or bad.text)}")
    return runs, failures


def table(label: str, paths: list[Path]) -> str:
    runs, failures = collect(paths)
    head = "| test | runs | failures | first error line of each failure |"
    out = [f"### {label}", "", head, "|---|---|---|---|"]
    for test in sorted(set(runs) | set(failures)):
        lines = "<br>".join(f.replace("|", "\\|") for f in failures.get(test, [])) or ""
        out.append(f"| `{test}` | {runs.get(test, 0)} | {len(failures.get(test, []))} | {lines} |")
    total = sum(runs.values())
    bad = sum(len(v) for v in failures.values())
    out += ["", f"{len(paths)} rounds, {total} test runs, {bad} failures.", ""]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: flakehunt_table.py LABEL ROUND.xml...", file=sys.stderr)
        return 2
    print(table(argv[0], [Path(p) for p in argv[1:]]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
