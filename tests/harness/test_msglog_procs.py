"""The message-log reader/follower and process ownership (no orphans, safe stale reaping)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil

from harness import procs
from harness.contracts.msglog import LogFollower, MessageLogWriter, iter_records


def test_torn_last_line_is_skipped_and_counted(tmp_path):
    path = tmp_path / "m.jsonl"
    with MessageLogWriter(path, "r", "a") as w:
        w.write("sent", msg_id="m1")
        w.write("sent", msg_id="m2")
    with path.open("a") as f:
        f.write('{"ts": 1, "event": "sent", "msg_')  # a kill -9 mid-write
    bad: list[str] = []
    recs = list(iter_records(path, bad))
    assert [r["msg_id"] for r in recs] == ["m1", "m2"]
    assert all(r["run"] == "r" and r["agent"] == "a" and isinstance(r["ts"], float) for r in recs)
    assert len(bad) == 1


def test_follower_waits_for_the_end_of_a_partial_line(tmp_path):
    path = tmp_path / "m.jsonl"
    follower = LogFollower(path)
    assert follower.new_records() == []
    path.write_text('{"a": 1}\n{"b":')
    assert follower.new_records() == [{"a": 1}]
    with path.open("a") as f:
        f.write(" 2}\n")
    assert follower.new_records() == [{"b": 2}]


def test_kill_reaches_the_whole_process_group(tmp_path):
    # The child starts a grandchild; killing the child's group must take both.
    script = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "time.sleep(60)\n"
    )
    p = procs.spawn("grp", [sys.executable, "-c", script], tmp_path / "out.log", pid_dir=tmp_path / "pids")
    time.sleep(0.5)
    kids = psutil.Process(p.pid).children(recursive=True)
    assert kids, "grandchild did not start"
    p.kill()
    gone, alive = psutil.wait_procs(kids, timeout=5)
    assert not alive
    assert not list((tmp_path / "pids").glob("*.json")), "pid file left behind"


def test_children_die_with_a_kill9d_parent(tmp_path):
    parent = (
        "import sys, time\n"
        "from harness import procs\n"
        "cmd = [sys.executable, '-c', 'import time; time.sleep(60)']\n"
        f"p = procs.spawn('sleeper', cmd, r'{tmp_path}/s.log')\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    h = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    child = int(h.stdout.readline())
    assert psutil.pid_exists(child)
    os.kill(h.pid, signal.SIGKILL)
    h.wait()
    deadline = time.monotonic() + 5
    while (
        time.monotonic() < deadline
        and psutil.pid_exists(child)
        and psutil.Process(child).status() != "zombie"
    ):
        time.sleep(0.1)
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == "zombie"


def test_reap_stale_kills_recorded_processes_only(tmp_path):
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    bystander = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(61)"], start_new_session=True
    )
    (pid_dir / "v.json").write_text(
        json.dumps({"pid": victim.pid, "name": "v", "cmd": psutil.Process(victim.pid).cmdline()})
    )
    # A recycled pid: the record's command line does not match the live process.
    (pid_dir / "b.json").write_text(
        json.dumps({"pid": bystander.pid, "name": "b", "cmd": ["something", "else"]})
    )
    try:
        assert procs.reap_stale(pid_dir) == [victim.pid]
        assert victim.wait(5) == -signal.SIGKILL
        assert bystander.poll() is None
        assert not list(pid_dir.glob("*.json"))
    finally:
        bystander.kill()
        victim.kill()


def test_reap_stale_leaves_a_live_harness_alone(tmp_path):
    # A harness running beside this one (here: this very process) still owns its children.
    p = procs.spawn(
        "mine",
        [sys.executable, "-c", "import time; time.sleep(60)"],
        tmp_path / "o.log",
        pid_dir=tmp_path / "pids",
    )
    try:
        assert procs.reap_stale(tmp_path / "pids") == []
        assert p.alive()
        assert list((tmp_path / "pids").glob("*.json"))
    finally:
        p.kill()
