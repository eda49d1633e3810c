"""The one atomic writer (harness.contracts.manifest.atomic_write) the report also writes through."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.contracts.manifest import atomic_write


def test_replaces_the_file_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    path.write_text("old", encoding="utf-8")
    atomic_write(path, "new ✓")
    assert path.read_text(encoding="utf-8") == "new ✓"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_a_failed_write_keeps_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    path.write_text("old", encoding="utf-8")
    with pytest.raises(UnicodeEncodeError):
        atomic_write(path, "half \ud800")  # a lone surrogate cannot be encoded: the write fails
    assert path.read_text(encoding="utf-8") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.md"]
