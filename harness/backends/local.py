"""Brokers as local Java processes (the embedded default).

Uses Debian's ActiveMQ (/usr/share/activemq) or `ACTIVEMQ_HOME`. Every JVM goes through
`harness.procs`, so none outlives the harness: PR_SET_PDEATHSIG kills it when the harness dies
(even by kill -9), it leads its own process group, and its pid file lets a later harness reap it.

Run folder (`<run>/brokers/`): one folder per broker (conf/, data/, lib/, broker.log,
stdout.log), `<group>-store/kahadb` shared by a group's members, and `owner.json` naming the
harness process that owns the run. A later start in the same folder, or in a sibling run folder
whose owner is gone, reaps what is left (only processes whose command line is the recorded one)
and moves the stale `brokers/` aside to `brokers.stale-<time>/`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import psutil

from harness import procs
from harness.backends.base import BackendError
from harness.backends.linkmirror import LinkMirror
from harness.brokerconf import needs_tls, render_broker
from harness.plan import HOST, BrokerPlan, Plan, release_ports
from harness.tls import make_run_tls

DEBIAN_HOME = Path("/usr/share/activemq")
# Debian's activemq ships no MQTT codec/transport jars; its MQTT connector needs these on lib/.
EXTRA_JARS = ("mqtt-client.jar", "hawtdispatch.jar", "hawtdispatch-transport.jar")
JAVA_LIBS = Path("/usr/share/java")
STARTED = re.compile(r"Apache ActiveMQ \S+ \((?P<name>[^,]+), [^)]*\) started")
SLAVE = re.compile(r"is now in slave mode|waiting a lock to be acquired|[Ww]aiting for lock")
FATAL = re.compile(
    r"Address already in use|Failed to start Apache ActiveMQ|BeanDefinitionStoreException|"
    r"XmlBeanDefinitionStoreException|java\.lang\.OutOfMemoryError|Could not create Transport"
)
START_TIMEOUT = 60.0


def activemq_home() -> Path:
    return Path(os.environ.get("ACTIVEMQ_HOME") or DEBIAN_HOME)


def activemq_command(
    java: str, home: Path, conf_dir: Path, base_dir: Path, data_dir: Path, heap_mb: int
) -> list[str]:
    """The broker's JVM command line (`activemq.jar start xbean:file:...`, not the init script)."""
    return [
        java,
        f"-Xmx{heap_mb}m",
        "-Xms64m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        f"-Dlog4j.configuration=file:{conf_dir}/log4j.properties",
        f"-Dactivemq.classpath={conf_dir}",
        f"-Dactivemq.home={home}",
        f"-Dactivemq.base={base_dir}",
        f"-Dactivemq.conf={conf_dir}",
        f"-Dactivemq.data={data_dir}",
        f"-Djava.io.tmpdir={data_dir}",
        "--add-opens",
        "java.base/java.lang=ALL-UNNAMED",
        "-jar",
        str(home / "bin" / "activemq.jar"),
        "start",
        f"xbean:file:{conf_dir}/activemq.xml",
    ]


def java_bin() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.exists():
            return str(candidate)
    found = shutil.which("java")
    if not found:
        where = f" (JAVA_HOME={java_home} has no bin/java)" if java_home else ""
        raise BackendError(
            f"Java not found{where}: install openjdk-17-jre-headless (make setup does) "
            "or set JAVA_HOME to a Java 11+ install"
        )
    return found


_java_checked: dict[str, str] = {}


def java_version(java: str) -> str:
    """`java -version`'s first line; raises BackendError if that Java cannot run."""
    if java not in _java_checked:
        try:
            out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
        except OSError as e:
            raise BackendError(f"Java at {java} cannot run: {e.strerror}") from None
        except subprocess.TimeoutExpired:
            raise BackendError(f"Java at {java} did not answer `-version` within 30 s") from None
        if out.returncode != 0:
            raise BackendError(f"Java at {java} fails: {(out.stderr or out.stdout).strip()[:300]}")
        _java_checked[java] = (
            (out.stderr or out.stdout).splitlines()[0] if (out.stderr or out.stdout) else "?"
        )
    return _java_checked[java]


def _port_open(port: int, timeout: float = 0.3) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def _port_bound(port: int) -> bool:
    """Whether some process listens on `port` (a bind test: no connection, nothing logged)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return True
    return False


def listening_ports(netns_pid: int | None = None) -> set[int] | None:
    """Ports with a socket in LISTEN state in this network namespace, or in that of `netns_pid`
    (e.g. a container's init process); None if /proc is unreadable.

    Read from /proc/net/tcp{,6}: unlike a connect probe it creates no connection the broker would
    log, and unlike a bind probe it can never make a starting broker's bind fail.
    """
    ports: set[int] = set()
    found = False
    root = "/proc" if netns_pid is None else f"/proc/{netns_pid}"
    for f in (f"{root}/net/tcp", f"{root}/net/tcp6"):
        try:
            with open(f, encoding="ascii") as fh:
                next(fh, None)
                for line in fh:
                    parts = line.split()
                    if len(parts) > 3 and parts[3] == "0A":
                        ports.add(int(parts[1].rsplit(":", 1)[1], 16))
            found = True
        except OSError:
            continue
    return ports if found else None


def _listening(port: int) -> bool:
    ports = listening_ports()
    return _port_open(port) if ports is None else port in ports


# -- stale runs ----------------------------------------------------------------------------------


def _owner_record() -> dict[str, object]:
    me = psutil.Process()
    return {"pid": me.pid, "created": me.create_time(), "host": socket.gethostname()}


def owner_alive(run_dir: Path) -> bool | None:
    """True/False whether the harness that owns `run_dir` lives; None when no owner is recorded
    or the run was closed cleanly (nothing can be stale then)."""
    f = Path(run_dir) / "brokers" / "owner.json"
    try:
        rec = json.loads(f.read_text())
    except (OSError, ValueError):
        return None
    if rec.get("closed") or rec.get("reaped"):
        return None
    if rec.get("host") not in (None, socket.gethostname()):
        return True  # another machine's run on a shared folder: not ours to judge
    try:
        proc = psutil.Process(int(rec["pid"]))
        return abs(proc.create_time() - float(rec["created"])) < 1.0
    except (psutil.Error, KeyError, ValueError, TypeError):
        return False


def _recorded_owner_alive(rec: dict[str, object]) -> bool:
    """Whether the harness recorded in a procs pid file (`owner_pid`, `owner_started`) lives."""
    if "owner_pid" not in rec:
        return False
    try:
        owner = psutil.Process(int(str(rec["owner_pid"])))
        return abs(owner.create_time() - float(str(rec["owner_started"]))) < 0.01
    except (KeyError, ValueError, psutil.Error):
        return False


def reap_recorded(pid_dir: Path, keep_children_of: int | None = None) -> list[int]:
    """Kill the process groups recorded in `pid_dir` (procs' pid files) whose command line is the
    recorded one, except children of `keep_children_of`; drop the pid files of dead ones."""
    killed: list[int] = []
    if not pid_dir.is_dir():
        return killed
    for f in sorted(pid_dir.glob("*.json")):
        try:
            rec = json.loads(f.read_text())
            if _recorded_owner_alive(rec):
                continue  # procs records its owner harness: a live one keeps its processes
            proc = psutil.Process(int(rec["pid"]))
            if keep_children_of is not None and proc.ppid() == keep_children_of:
                continue
            if proc.cmdline() != rec["cmd"]:
                f.unlink(missing_ok=True)  # the pid was reused by something else: not ours
                continue
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # procs makes every child a group leader
            except ProcessLookupError:
                os.kill(proc.pid, signal.SIGKILL)
            killed.append(proc.pid)
            with contextlib.suppress(psutil.Error):
                proc.wait(5)
        except (psutil.NoSuchProcess, ProcessLookupError, ValueError, KeyError, OSError):
            pass
        except psutil.AccessDenied:
            continue
        f.unlink(missing_ok=True)
    return killed


def clean_stale_run(run_dir: Path, move_aside: bool = False) -> list[int]:
    """Reap a run folder whose owner died without closing it: its recorded processes are killed.

    Safe by construction: nothing happens unless the run's recorded owner process is gone (and
    did not close the run), and only processes whose command line matches their pid file are
    signalled. `move_aside` (for a new start in the same folder) also moves the stale `brokers/`
    to `brokers.stale-<time>/`, keeping its logs for the post-mortem.
    """
    run_dir = Path(run_dir)
    if owner_alive(run_dir) is not False:
        return []
    killed = reap_recorded(run_dir / "pids", keep_children_of=os.getpid())
    brokers = run_dir / "brokers"
    owner = brokers / "owner.json"
    try:
        rec = json.loads(owner.read_text())
        rec["reaped"] = {"by": os.getpid(), "at": time.time(), "killed": killed}
        owner.write_text(json.dumps(rec))
    except (OSError, ValueError):
        pass
    if move_aside and brokers.is_dir():
        brokers.rename(run_dir / f"brokers.stale-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    return killed


def clean_stale_runs(root: Path) -> list[int]:
    """`clean_stale_run` for every run folder under `root` (e.g. reports/)."""
    killed: list[int] = []
    if Path(root).is_dir():
        for owner in Path(root).glob("*/brokers/owner.json"):
            killed += clean_stale_run(owner.parent.parent)
    return killed


# -- the backend ---------------------------------------------------------------------------------


class LocalBackend:
    def __init__(self, plan: Plan, run_dir: str | Path, heap_mb: int = 256) -> None:
        self.plan = plan
        self.run_dir = Path(run_dir).resolve()
        self.heap_mb = heap_mb
        self.home = activemq_home()
        self._procs: dict[str, procs.ManagedProcess] = {}
        self._log_offset: dict[str, int] = {}
        self._paused: set[str] = set()
        self._started: dict[str, float] = {}
        self.mirror: LinkMirror | None = None
        # every start: (broker, "master" or "slave", seconds from spawn to serving / waiting for lock)
        self.ready_log: list[tuple[str, str, float]] = []

    # -- preparation -------------------------------------------------------------------------
    def preflight(self) -> None:
        """Check everything that can be checked before anything starts (clean stale leftovers)."""
        java_version(java_bin())
        jar = self.home / "bin" / "activemq.jar"
        if not jar.is_file():
            raise BackendError(
                f"ActiveMQ not found: {jar} is missing; install Debian's activemq "
                "(make setup does) or set ACTIVEMQ_HOME to an ActiveMQ 5.x install"
            )
        uses_mqtt = any("mqtt" in b.ports for b in self.plan.brokers.values())
        if uses_mqtt and not self._has_mqtt_jars():
            missing = [j for j in EXTRA_JARS if not (JAVA_LIBS / j).exists()]
            raise BackendError(
                f"MQTT connector needs {', '.join(missing)}: install libmqtt-client-java "
                "and libhawtdispatch-java (make setup does)"
            )
        self._check_writable()
        self._clean_stale()
        for b in self.plan.brokers.values():
            if self.alive(b.name):
                continue
            for c, port in b.ports.items():
                if _port_bound(port):
                    raise BackendError(
                        f"port {port} ({b.name} {c}) is already in use by another process; "
                        "unpin it in the topology (ports are then allocated) or free it"
                    )

    def _check_writable(self) -> None:
        dirs = [self.run_dir / "brokers"] + sorted({b.store_dir for b in self.plan.brokers.values()})
        for d in dirs:
            try:
                d.mkdir(parents=True, exist_ok=True)
                probe = d / f".write-probe-{os.getpid()}"
                probe.write_text("")
                probe.unlink()
            except OSError as e:
                raise BackendError(
                    f"broker data folder {d} is not writable ({e.strerror}); choose a run "
                    "folder on a writable disk (reports/ by default)"
                ) from None

    def _clean_stale(self) -> None:
        """Leftovers of a crashed harness in this run folder or its siblings are reaped."""
        if self._procs:
            return  # we are running here: nothing is stale
        if owner_alive(self.run_dir) is False:
            clean_stale_run(self.run_dir, move_aside=True)
        else:
            # Brokers recorded in pids/ that are not children of this process are leftovers of an
            # earlier start in this folder (a closed run leaves no pid files behind).
            names = tuple(f"{b}." for b in self.plan.brokers)
            pid_dir = self.run_dir / "pids"
            if pid_dir.is_dir() and any(f.name.startswith(names) for f in pid_dir.glob("*.json")):
                stale = self.run_dir / "pids.stale"
                stale.mkdir(exist_ok=True)
                for f in pid_dir.glob("*.json"):
                    if f.name.startswith(names):
                        f.rename(stale / f.name)
                reap_recorded(stale, keep_children_of=os.getpid())
                shutil.rmtree(stale, ignore_errors=True)
        clean_stale_runs(self.run_dir.parent)
        self._write_owner(closed=False)

    def _write_owner(self, closed: bool) -> None:
        d = self.run_dir / "brokers"
        d.mkdir(parents=True, exist_ok=True)
        rec = {**_owner_record(), "closed": closed}
        (d / "owner.json").write_text(json.dumps(rec))

    def _has_mqtt_jars(self) -> bool:
        if any((self.home / "lib").glob("mqtt-client*.jar")):
            return True
        return all((JAVA_LIBS / j).exists() for j in EXTRA_JARS)

    def _prepare_tls(self) -> None:
        wanted = any(needs_tls(self.plan, b) for b in self.plan.brokers.values())
        if wanted and not (self.plan.tls_dir / "password").exists():
            make_run_tls(self.plan.tls_dir, list(self.plan.brokers), run_label=self.run_dir.name)

    def _prepare(self, b: BrokerPlan) -> None:
        for d in (b.conf_dir, b.data_dir, b.store_dir, b.base_dir / "lib"):
            d.mkdir(parents=True, exist_ok=True)
        for j in EXTRA_JARS:
            src, dst = JAVA_LIBS / j, b.base_dir / "lib" / j
            if src.exists() and not dst.exists():
                dst.symlink_to(src)
        for fname, text in render_broker(self.plan, b).items():
            path = b.conf_dir / fname
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # may hold passwords
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)

    def _command(self, b: BrokerPlan) -> list[str]:
        return activemq_command(java_bin(), self.home, b.conf_dir, b.base_dir, b.data_dir, self.heap_mb)

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        self.preflight()
        self._attach_recorded_proxy()
        try:
            self._prepare_tls()
            for b in self.plan.brokers.values():
                self._prepare(b)
            # Member 1 of every group first, so it takes the lock and becomes master.
            firsts = [b for b in self.plan.brokers.values() if b.index == 1]
            for b in firsts:
                self._spawn(b)
            for b in firsts:
                self._wait_state(b.name, want_master=True)
            others = [b for b in self.plan.brokers.values() if b.index > 1]
            for b in others:
                self._spawn(b)
            for b in others:
                self._wait_state(b.name, want_master=False)
        except BaseException:
            self.close()  # nothing half-started
            raise

    def _spawn(self, b: BrokerPlan) -> None:
        b.log_file.touch()
        self._log_offset[b.name] = b.log_file.stat().st_size
        self._paused.discard(b.name)
        self._started[b.name] = time.monotonic()
        self._procs[b.name] = procs.spawn(
            b.name, self._command(b), b.base_dir / "stdout.log", cwd=b.base_dir, pid_dir=self.run_dir / "pids"
        )

    def _new_log(self, name: str) -> str:
        """The broker's log written since its last (re)start."""
        b = self.plan.brokers[name]
        with b.log_file.open(encoding="utf-8", errors="replace") as f:
            f.seek(self._log_offset.get(name, 0))
            return f.read()

    def _wait_state(self, name: str, want_master: bool, timeout: float = START_TIMEOUT) -> str:
        """Wait until `name` serves ("master") or, unless `want_master`, waits for the lock ("slave")."""
        b = self.plan.brokers[name]
        deadline = time.monotonic() + timeout
        while True:
            p = self._procs.get(name)
            log = self._new_log(name)
            if p is None or not p.alive():
                code = p.popen.returncode if p else "?"
                raise BackendError(
                    f"broker {name} died at start (exit {code}); log tail:\n" + self._tail(name)
                )
            fatal = FATAL.search(log)
            if fatal:
                p.kill()
                self._procs.pop(name, None)
                raise BackendError(
                    f"broker {name} failed at start ({fatal.group(0)}); log tail:\n" + self._tail(name)
                )
            if STARTED.search(log) and _listening(b.ports["openwire"]):
                self._ready(name, "master")
                self._sync_links()
                return "master"
            if not want_master and SLAVE.search(log):
                self._ready(name, "slave")
                return "slave"
            if time.monotonic() > deadline:
                raise BackendError(
                    f"broker {name} not ready after {timeout:.0f}s (neither serving nor waiting "
                    "for the store lock); log tail:\n" + self._tail(name)
                )
            time.sleep(0.05)

    def _ready(self, name: str, state: str) -> None:
        self.ready_log.append((name, state, time.monotonic() - self._started[name]))

    def _tail(self, name: str, lines: int = 15) -> str:
        """The broker's own diagnosis: its first ERROR, the root cause, then the log's last lines
        (stack frames left out)."""
        b = self.plan.brokers[name]
        text = ""
        for f in (b.log_file, b.base_dir / "stdout.log"):
            if not f.exists():
                continue
            all_lines = f.read_text(errors="replace").splitlines()
            if f == b.log_file:
                all_lines = all_lines[self._line_of_offset(f, self._log_offset.get(name, 0)) :]
            useful = [ln for ln in all_lines if not ln.startswith(("\tat ", "\t... "))]
            if not useful:
                continue
            key = [ln for ln in useful if "| ERROR |" in ln][:1]
            key += [ln for ln in useful if ln.startswith("Caused by:")][-1:]
            tail = [ln for ln in useful[-lines:] if ln not in key]
            text += f"--- {f}\n" + "\n".join(key + (["..."] if key else []) + tail) + "\n"
        return text or "(no output)"

    @staticmethod
    def _line_of_offset(path: Path, offset: int) -> int:
        with path.open("rb") as fh:
            return fh.read(offset).count(b"\n")

    def attach_proxy(self, proxy: object) -> None:
        """Mirror broker listening state onto the fault proxy's links (see linkmirror.py).

        The environment calls this once the proxy holds the plan's links; the mirror runs until
        `close()`.
        """
        if self.mirror is None:
            self.mirror = LinkMirror(self.plan, proxy, listening_ports)
            self.mirror.start()

    def _attach_recorded_proxy(self) -> None:
        """Attach the fault proxy named in the run record (env.up writes it before `start`)."""
        if self.mirror is not None or os.environ.get("BFH_LINK_MIRROR", "1") == "0":
            return
        try:
            url = json.loads((self.run_dir / "run.json").read_text())["fault_proxy"]["url"]
        except (OSError, ValueError, KeyError, TypeError):
            return
        from harness.faultproxy.client import ToxiproxyClient

        self.attach_proxy(ToxiproxyClient(url))

    def _sync_links(self) -> None:
        if self.mirror is not None:
            try:
                self.mirror.sync(force=True)
            except Exception as e:  # never let bookkeeping break a fault action
                self.mirror.errors.append(f"{type(e).__name__}: {e}")

    def close(self) -> None:
        if self.mirror is not None:
            self.mirror.stop()
            self.mirror = None
        for name in list(self._procs):
            self._procs.pop(name).kill()
        self._paused.clear()
        if (self.run_dir / "brokers" / "owner.json").exists():
            self._write_owner(closed=True)
            # The run is over: its ports may be handed out again (the proxy stops right after).
            ports = [p for b in self.plan.brokers.values() for p in b.ports.values()]
            release_ports(ports + [lk.listen_port for lk in self.plan.links])

    # -- faults --------------------------------------------------------------------------------
    def _proc(self, name: str) -> procs.ManagedProcess:
        if name not in self.plan.brokers:
            raise BackendError(f"unknown broker {name!r}; brokers: {', '.join(self.plan.brokers)}")
        p = self._procs.get(name)
        if p is None or not p.alive():
            raise BackendError(f"broker {name} is not running")
        return p

    def kill(self, broker: str) -> None:
        self._proc(broker).kill()
        self._procs.pop(broker, None)
        self._paused.discard(broker)
        self._sync_links()

    def stop(self, broker: str) -> None:
        self._proc(broker).terminate(timeout=30)
        self._procs.pop(broker, None)
        self._paused.discard(broker)
        self._sync_links()

    def pause(self, broker: str) -> None:
        self._proc(broker).signal(signal.SIGSTOP)
        self._paused.add(broker)

    def resume(self, broker: str) -> None:
        self._proc(broker).signal(signal.SIGCONT)
        self._paused.discard(broker)

    def start_broker(self, broker: str) -> None:
        """Start a stopped/killed member; returns once it serves or waits for the store lock."""
        if self.alive(broker):
            raise BackendError(f"broker {broker} is already running")
        b = self.plan.brokers[broker]
        self._spawn(b)
        try:
            self._wait_state(broker, want_master=False)
        except BackendError:
            p = self._procs.pop(broker, None)
            if p is not None:
                p.kill()
            raise

    def restart(self, broker: str) -> None:
        if self.alive(broker):
            self.kill(broker)
        self.start_broker(broker)

    # -- state ---------------------------------------------------------------------------------
    def alive(self, broker: str) -> bool:
        p = self._procs.get(broker)
        return p is not None and p.alive()

    def paused(self, broker: str) -> bool:
        return broker in self._paused

    def pid(self, broker: str) -> int | None:
        p = self._procs.get(broker)
        return p.pid if p is not None and p.alive() else None

    def _serving(self, broker: str) -> bool:
        """Its openwire port is bound (a slave waiting for the store lock binds none)."""
        return _listening(self.plan.brokers[broker].ports["openwire"])

    def master(self, group: str) -> str | None:
        """The member serving clients now: alive and serving."""
        for b in self.plan.members(group):
            if self.alive(b.name) and self._serving(b.name):
                return b.name
        return None

    def state(self, broker: str) -> str:
        """ "master", "slave" (alive, waiting for the lock), "paused" or "down"."""
        if not self.alive(broker):
            return "down"
        if broker in self._paused:
            return "paused"
        return "master" if self._serving(broker) else "slave"

    def states(self) -> dict[str, str]:
        return {b: self.state(b) for b in self.plan.brokers}

    def wait_master(self, group: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = self.master(group)
            if m is not None:
                self._sync_links()
                return m
            time.sleep(0.05)
        raise BackendError(f"no master in group {group} after {timeout:.0f}s; states: {self.states()}")

    def broker_log(self, broker: str) -> Path:
        return self.plan.brokers[broker].log_file

    def log_size(self, broker: str) -> int:
        """A position in the broker's log, for `log_since`."""
        try:
            return self.broker_log(broker).stat().st_size
        except FileNotFoundError:
            return 0

    def log_since(self, broker: str, offset: int = 0) -> str:
        try:
            with self.broker_log(broker).open(encoding="utf-8", errors="replace") as f:
                f.seek(offset)
                return f.read()
        except FileNotFoundError:
            return ""
