"""What both backends do alike around a broker: its JVM command line, its run folder (configs,
TLS material, a writable check), its log read from the last start, and which ports listen.

The local backend runs the command as a child process, the Docker backend in a container of the
ActiveMQ image; both share these by composition (neither subclasses the other).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

from harness.account import plugin as account_plugin
from harness.backends.base import BackendError
from harness.backends.sockdiag import listening_tcp_ports
from harness.deploy.brokerconf import needs_tls, render_broker
from harness.deploy.plan import HOST, BrokerPlan, Plan
from harness.deploy.tls import make_run_tls
from harness.topology.activemq import activemq_home

__all__ = ["activemq_home"]

# Debian's activemq ships no MQTT codec/transport jars; its MQTT connector needs these on lib/.
EXTRA_JARS = ("mqtt-client.jar", "hawtdispatch.jar", "hawtdispatch-transport.jar")
JAVA_LIBS = Path("/usr/share/java")


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
        text = out.stderr or out.stdout
        _java_checked[java] = text.splitlines()[0] if text else "?"
    return _java_checked[java]


# -- ports ---------------------------------------------------------------------------------------
def listening_ports(netns_pid: int | None = None) -> set[int] | None:
    """Ports with a socket in LISTEN state in this network namespace, or in that of `netns_pid`
    (e.g. a container's init process); None if /proc is unreadable.

    Asked of the kernel (sock_diag, harness.backends.sockdiag) for this namespace, else read from
    /proc/net/tcp{,6}: unlike a connect probe it creates no connection the broker would log, and
    unlike a bind probe it can never make a starting broker's bind fail.
    """
    if netns_pid is None:
        fast = listening_tcp_ports()
        if fast is not None:
            return fast
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


def port_open(port: int, timeout: float = 0.3) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def port_bound(port: int) -> bool:
    """Whether some process listens on `port` (a bind test: no connection, nothing logged)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return True
    return False


def listening(port: int) -> bool:
    """Whether `port` listens in this network namespace."""
    ports = listening_ports()
    return port_open(port) if ports is None else port in ports


# -- the run folder ------------------------------------------------------------------------------
def check_writable(plan: Plan, run_dir: Path) -> None:
    dirs = [run_dir / "brokers"] + sorted({b.store_dir for b in plan.brokers.values()})
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


def prepare_tls(plan: Plan, run_dir: Path) -> None:
    wanted = any(needs_tls(plan, b) for b in plan.brokers.values())
    if wanted and not (plan.tls_dir / "password").exists():
        make_run_tls(plan.tls_dir, list(plan.brokers), run_label=run_dir.name)


def prepare_broker(plan: Plan, b: BrokerPlan) -> None:
    """The broker's folders, its MQTT jars and its rendered configs (mode 0600: may hold passwords)."""
    for d in (b.conf_dir, b.data_dir, b.store_dir, b.base_dir / "lib"):
        d.mkdir(parents=True, exist_ok=True)
    for j in EXTRA_JARS:
        src, dst = JAVA_LIBS / j, b.base_dir / "lib" / j
        if src.exists() and not dst.exists():
            dst.symlink_to(src)
    files = render_broker(plan, b)
    files["activemq.xml"] = _with_account(b, files["activemq.xml"])
    for fname, text in files.items():
        path = b.conf_dir / fname
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)


def _with_account(b: BrokerPlan, xml: str) -> str:
    """The config with the broker's account plugin (harness/account), or as it was, the reason
    written beside the member's account file: its records are then a gap, never an empty account."""
    why_file = b.base_dir / account_plugin.UNAVAILABLE_FILE
    why_file.unlink(missing_ok=True)
    if not account_plugin.enabled():
        why_file.write_text(f"{account_plugin.DISABLED}=0\n")
        return xml
    try:
        account_plugin.install(b.base_dir / "lib")
        return account_plugin.inject(xml)
    except (account_plugin.AccountUnavailable, OSError, subprocess.SubprocessError) as e:
        why_file.write_text(f"{e}\n")
        return xml


# -- broker logs ---------------------------------------------------------------------------------
class BrokerLogs:
    """Each broker's log (`brokers/<name>/broker.log`), read from its last (re)start."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self._offset: dict[str, int] = {}

    def path(self, name: str) -> Path:
        return self.plan.brokers[name].log_file

    def mark_start(self, name: str) -> None:
        """A (re)start: what the log holds so far belongs to earlier starts."""
        f = self.path(name)
        f.touch()
        self._offset[name] = f.stat().st_size

    def since_start(self, name: str) -> str:
        return self.since(name, self._offset.get(name, 0))

    def size(self, name: str) -> int:
        try:
            return self.path(name).stat().st_size
        except FileNotFoundError:
            return 0

    def since(self, name: str, offset: int = 0) -> str:
        try:
            with self.path(name).open(encoding="utf-8", errors="replace") as f:
                f.seek(offset)
                return f.read()
        except FileNotFoundError:
            return ""

    def tail(self, name: str, lines: int = 15) -> str:
        """The broker's own diagnosis: its first ERROR, the root cause, then the log's last lines
        (stack frames left out), from its log since the start and its stdout."""
        b = self.plan.brokers[name]
        text = ""
        for f in (b.log_file, b.base_dir / "stdout.log"):
            if not f.exists():
                continue
            all_lines = f.read_text(errors="replace").splitlines()
            if f == b.log_file:
                with f.open("rb") as fh:
                    first = fh.read(self._offset.get(name, 0)).count(b"\n")
                all_lines = all_lines[first:]
            useful = [ln for ln in all_lines if not ln.startswith(("\tat ", "\t... "))]
            if not useful:
                continue
            key = [ln for ln in useful if "| ERROR |" in ln][:1]
            key += [ln for ln in useful if ln.startswith("Caused by:")][-1:]
            tail = [ln for ln in useful[-lines:] if ln not in key]
            text += f"--- {f}\n" + "\n".join(key + (["..."] if key else []) + tail) + "\n"
        return text or "(no output)"
