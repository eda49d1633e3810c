"""The load probe (harness/run/loadprobe.py) on real loopback sockets: a broker that answers, one
that accepts and stays silent (paused), one that refuses (down); samples and summary on disk."""

from __future__ import annotations

import json
import os
import socket
import threading
import time

from harness.contracts import loadlog
from harness.run.loadprobe import ANSWER_TIMEOUT_S, LoadProbe, broker_answer_s


def _listener(answer: bool) -> tuple[socket.socket, int]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            if answer:
                conn.sendall(b"\x00")  # an OpenWire broker sends WireFormatInfo on accept
                conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv, srv.getsockname()[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_broker_answers_silence_and_refusal():
    up, up_port = _listener(answer=True)
    mute, mute_port = _listener(answer=False)
    try:
        assert broker_answer_s("127.0.0.1", up_port) < 0.5
        assert broker_answer_s("127.0.0.1", mute_port, timeout=0.3) == 0.3  # accepted, no answer
        assert broker_answer_s("127.0.0.1", _free_port()) is None  # refused: down, not slow
    finally:
        up.close()
        mute.close()


def test_the_probe_samples_and_writes_its_summary(tmp_path):
    up, up_port = _listener(answer=True)
    try:
        probe = LoadProbe(tmp_path, None, {"b1": ("127.0.0.1", up_port), "b2": ("127.0.0.1", _free_port())})
        probe.start()
        time.sleep(2.5)
        summary = probe.stop()
    finally:
        up.close()
    rows = loadlog.read(tmp_path)
    assert len(rows) >= 2 and summary is not None and summary["samples"] == len(rows)
    assert all(r["brokers"]["b2"] is None and r["brokers"]["b1"] < ANSWER_TIMEOUT_S for r in rows)
    assert sum(r["probe_n"] for r in rows) >= 15  # ~10 sleeps a second
    assert summary["probe"]["max_s"] is not None and summary["worst"][0]["at"].endswith("UTC")
    # the run queue per core: load1 over the CPUs the harness may use
    assert all(r["cpus"] == len(os.sched_getaffinity(0)) for r in rows)
    assert summary["load1_per_core_max"] == round(max(r["load1"] / r["cpus"] for r in rows), 2)
    json.dumps(summary)  # run.json takes it as it is
    assert probe.stop() is None  # stopped once


def test_the_agents_own_cpu_is_sampled_from_their_process_group(tmp_path):
    """A real agent-like process group (a parent and a spinning child, as a fleet's members or a
    shell-wrapped agent are): their CPU seconds since the last sample, every process counted."""
    import subprocess
    import sys

    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\ntime.sleep(30)\n"
    parent = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {spin!r}])"],
        start_new_session=True,
    )
    try:
        probe = LoadProbe(tmp_path, None, {}, agent_groups=lambda: [parent.pid])
        probe.sample()
        deadline = time.monotonic() + 20
        used = 0.0
        while used < 0.6 and time.monotonic() < deadline:
            time.sleep(0.5)
            used += probe.sample()["agents_cpu_s"]
        assert used >= 0.6, used  # the child's spin, found through the parent's process group
        time.sleep(0.3)
        assert probe.sample()["agents_cpu_s"] < 0.2  # asleep now: nothing more
        assert LoadProbe(tmp_path, None, {}).sample()["agents_cpu_s"] == 0.0  # no agent yet
    finally:
        os.killpg(parent.pid, 9)
        parent.wait()
