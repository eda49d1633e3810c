"""Fixtures for the Spark reconciliation tests: one SparkSession for the whole test session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # pandas_reference, histories


@pytest.fixture(scope="session")
def spark():
    from spark_analysis.session import get_spark

    session = get_spark(app="bfh-tests")
    yield session
    session.stop()
