from __future__ import annotations

from pathlib import Path

import pytest

from tests.install.venv import build_installed

# the temp agent repository's files (copied out by test_plugin.py), not tests of this checkout
collect_ignore = ["agent_repo"]


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built and installed into a fresh venv in a temp dir (tests/install/venv.py)."""
    return build_installed(tmp_path_factory.mktemp("bfh-install"))
