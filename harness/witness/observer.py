"""Start and stop the advisory observer (Observer.java) for a plan's brokers.

One JVM watches every broker on its harness-only witness connector (`BrokerPlan.witness_port`)
and appends raw records to `RUN_DIR/brokers/observer.jsonl`; `collect()` merges them into
events.jsonl. The helper is compiled once per source version into a cache folder; without a
JDK (`javac`) or ActiveMQ's client jars the observer is skipped with a warning, never the run.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

from harness import procs
from harness.deploy.plan import HOST, Plan
from harness.witness.events import GAP_END, OBSERVER_FILE, read_events

log = logging.getLogger(__name__)
#: how long `Observer.wait_ready` waits for the observer's first view of every group
READY_TIMEOUT_S = 20.0
SOURCE = Path(__file__).with_name("Observer.java")
JAR_DIRS = (Path("/usr/share/activemq/lib"), Path("/usr/share/java"))
# The client side of the inactivity monitor: a paused broker is a gap within ~1 s, not 30 s.
URL_OPTS = (
    "connectionTimeout=1000&wireFormat.maxInactivityDuration=1000"
    "&wireFormat.maxInactivityDurationInitalDelay=1000"
)


def enabled() -> bool:
    return os.environ.get("BFH_WITNESS", "1") != "0"


def classpath() -> list[Path]:
    """ActiveMQ's client jars and what they need (ACTIVEMQ_HOME first, then Debian's)."""
    dirs = [Path(os.environ["ACTIVEMQ_HOME"]) / "lib"] if os.environ.get("ACTIVEMQ_HOME") else []
    for d in [*dirs, *JAR_DIRS]:
        jars = sorted(d.glob("*.jar")) if d.is_dir() else []
        names = {j.name for j in jars}
        if "activemq-client.jar" in names or any(n.startswith("activemq-client-") for n in names):
            return [
                j
                for j in jars
                if "activemq" in j.name
                or "jms" in j.name
                or j.name.startswith(("hawtbuf", "slf4j-api", "geronimo-j2ee-management"))
            ]
    return []


def _cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    return base / "bfh" / f"witness-{digest}"


def compiled(cp: list[Path]) -> Path | None:
    """The folder holding Observer.class, compiling it first if needed; None without javac."""
    out = _cache_dir()
    if (out / "Observer.class").exists():
        return out
    javac = shutil.which("javac")
    if javac is None:
        return None
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    cmd = [javac, "-nowarn", "-d", str(tmp), "-cp", os.pathsep.join(map(str, cp)), str(SOURCE)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RuntimeError(f"witness observer does not compile: {done.stderr.strip()[:500]}")
    try:
        tmp.rename(out)
    except OSError:  # another harness compiled it at the same time
        shutil.rmtree(tmp, ignore_errors=True)
    return out


class Observer:
    """The running observer; `stop()` closes its windows (gap records) and ends the JVM."""

    def __init__(self, proc: procs.ManagedProcess | None, path: Path, why_not: str = "") -> None:
        self.proc = proc
        self.path = path
        self.why_not = why_not

    def wait_ready(self, plan: Plan, timeout: float = READY_TIMEOUT_S) -> bool:
        """Wait until the observer sees one member of every group (its `observer_gap_end`, written
        once its advisory subscriptions are active), so clients started next are seen live: a
        consumer added while the observer subscribes can be missed by the replay (issue 35, soak
        round 4). False (and a warning, never a failed run) on timeout or without an observer."""
        if self.proc is None:
            return False
        groups: dict[str, set[str]] = {}
        for b in plan.brokers.values():
            if b.witness_port:
                groups.setdefault(b.group, set()).add(b.name)
        deadline = time.monotonic() + timeout
        while True:
            seen = {str(r.get("broker")) for r in read_events(self.path) if r.get("event") == GAP_END}
            waiting = sorted(g for g, members in groups.items() if not members & seen)
            if not waiting:
                return True
            if time.monotonic() > deadline or not self.proc.alive():
                log.warning("broker witness observer not ready for %s after %.0f s", waiting, timeout)
                return False
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate(timeout=5)
            self.proc = None


def start(plan: Plan, run_dir: Path, java: str = "java", wait: bool = True) -> Observer:
    """Start the observer; with `wait`, return once it sees every group (`Observer.wait_ready`):
    the harness starts the agents next."""
    path = Path(run_dir) / "brokers" / OBSERVER_FILE
    targets = [
        f"{b.name}=tcp://{HOST}:{b.witness_port}?{URL_OPTS}" for b in plan.brokers.values() if b.witness_port
    ]
    if not targets:
        return Observer(None, path, "no witness connectors in this plan")
    cp = classpath()
    try:
        classes = compiled(cp) if cp else None
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        log.warning("broker witness observer skipped: %s", e)
        return Observer(None, path, str(e))
    if classes is None:
        why = "no javac (install a JDK)" if cp else "no ActiveMQ client jars"
        log.warning("broker witness observer skipped: %s", why)
        return Observer(None, path, why)
    path.parent.mkdir(parents=True, exist_ok=True)
    env = {}
    user = plan.bridge_user
    if user is not None:  # secured topologies refuse anonymous connections
        env = {"BFH_WITNESS_USER": user.name, "BFH_WITNESS_PASSWORD": user.password}
    cmd = [
        java,
        "-Xmx64m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-cp",
        os.pathsep.join([str(classes), *map(str, cp)]),
        "Observer",
        str(path),
        *targets,
    ]
    proc = procs.spawn(
        "witness", cmd, Path(run_dir) / "brokers" / "witness.log", env=env, pid_dir=Path(run_dir) / "pids"
    )
    obs = Observer(proc, path)
    if wait:
        obs.wait_ready(plan)
    return obs
