"""`bfh up` / `status` / `down` against a real pair: URLs and master shown, nothing left after down."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.cli.test_validate import bfh, running_under

pytestmark = [pytest.mark.broker]


def test_up_status_down(tmp_path: Path) -> None:
    up = bfh("up", "pair", "--reports", str(tmp_path), "--json", timeout=240)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        st = json.loads(up.stdout)
        assert st["masters"]["pair"] in ("pair-1", "pair-2")
        assert "pair-1-mqtt" in st["proxies"]
        host, port = st["client_urls"]["pair"]["mqtt"][0].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5):
            pass  # the first member's proxy accepts a client
        again = bfh("up", "pair", "--reports", str(tmp_path))
        assert again.returncode == 2 and "already up" in again.stderr
        status = bfh("status", "--reports", str(tmp_path))
        assert status.returncode == 0 and "master pair-" in status.stdout
    finally:
        down = bfh("down", "--reports", str(tmp_path))
    assert down.returncode == 0 and "stopped pair" in down.stdout
    assert not running_under(tmp_path)
    assert bfh("status", "--reports", str(tmp_path)).returncode == 3


def test_down_when_nothing_is_up(tmp_path: Path) -> None:
    p = bfh("down", "--reports", str(tmp_path), "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["stopped"] is False
