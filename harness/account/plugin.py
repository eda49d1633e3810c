"""Build the broker's account plugin (BrokerAccount.java) and put it into a broker's files.

The plugin is compiled once per source version into a jar in the cache folder, copied (not
linked: a container sees the run folder, not the host's cache) into `${activemq.base}/lib`, and
loaded by one bean added to the broker's `<plugins>`; nothing else in the config changes. Without
a JDK (`javac`, `jar`) or ActiveMQ's broker jar the broker runs without an account, and the run's
account says why (its blame rows become `unknown`, never a pass).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from harness.contracts.brokeraccount import UNAVAILABLE_FILE
from harness.topology.activemq import activemq_home

__all__ = ["UNAVAILABLE_FILE", "AccountUnavailable", "enabled", "inject", "install", "jar"]

SOURCE = Path(__file__).with_name("BrokerAccount.java")
JAR = "bfh-broker-account.jar"
CLASS = "bfh.BrokerAccount"
BEAN = f'<bean xmlns="http://www.springframework.org/schema/beans" id="bfhBrokerAccount" class="{CLASS}"/>'
DISABLED = "BFH_ACCOUNT"  # =0: brokers run without the plugin (a measurement of its cost)


class AccountUnavailable(Exception):
    """Why a broker runs without its account (one line)."""


def enabled() -> bool:
    return os.environ.get(DISABLED, "1") != "0"


def classpath() -> list[Path]:
    """ActiveMQ's jars the plugin compiles against (ACTIVEMQ_HOME's first, then Debian's)."""
    for d in (activemq_home() / "lib", Path("/usr/share/java")):
        jars = sorted(d.glob("activemq-*.jar")) if d.is_dir() else []
        if any(j.name.startswith("activemq-broker") for j in jars):
            extra = [j for j in sorted(d.glob("*.jar")) if j.name.startswith(("slf4j-api", "geronimo-j"))]
            return jars + extra
    return []


def _cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "bfh" / f"account-{hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]}"


def jar() -> Path:
    """The plugin's jar, built first if needed; AccountUnavailable when it cannot be."""
    out = _cache_dir() / JAR
    if out.exists():
        return out
    javac, jar_tool = shutil.which("javac"), shutil.which("jar")
    if not javac or not jar_tool:
        raise AccountUnavailable("no JDK (javac, jar): install openjdk-17-jdk-headless")
    cp = classpath()
    if not cp:
        raise AccountUnavailable("no ActiveMQ broker jar (activemq-broker*.jar) found")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        classes = Path(tmp) / "classes"
        built = Path(tmp) / JAR
        cmds = [
            [javac, "-nowarn", "--release", "11", "-d", str(classes), "-cp", os.pathsep.join(map(str, cp)),
             str(SOURCE)],
            [jar_tool, "cf", str(built), "-C", str(classes), "."],
        ]  # fmt: skip
        for cmd in cmds:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
            if done.returncode != 0:
                raise AccountUnavailable(f"the account plugin does not build: {done.stderr.strip()[:300]}")
        built.replace(out)  # atomic: a concurrent build's jar is as good
    return out


def install(lib_dir: Path) -> None:
    """Copy the jar into a broker's `${activemq.base}/lib` (AccountUnavailable if it cannot be built)."""
    src = jar()
    lib_dir.mkdir(parents=True, exist_ok=True)
    dst = lib_dir / JAR
    if not dst.exists() or dst.stat().st_size != src.stat().st_size:
        tmp = dst.with_suffix(f".tmp{os.getpid()}")
        shutil.copyfile(src, tmp)
        tmp.replace(dst)


_BROKER = re.compile(r"<(?P<p>[\w.-]+:)?broker(?=[\s>/])(?P<attrs>[^>]*)>", re.S)


def inject(xml: str) -> str:
    """`xml` with the plugin's bean as the first of the broker's `<plugins>` (a `<plugins>` is
    added after the broker's start tag when it has none). A second `<plugins>` would replace the
    first (Spring sets the property twice), so an existing one is always reused. AccountUnavailable
    when the broker element cannot be found or names its plugins by reference."""
    m = _BROKER.search(xml)
    if m is None:
        raise AccountUnavailable("no <broker> element found in the rendered activemq.xml")
    if re.search(r"\splugins\s*=", m.group("attrs")):
        raise AccountUnavailable("the <broker> sets its plugins by attribute")
    prefix = m.group("p") or ""
    if m.group("attrs").rstrip().endswith("/"):  # <broker .../>: no children yet
        opened = f"<{prefix}broker{m.group('attrs').rstrip()[:-1]}>"
        body = f"<{prefix}plugins>{BEAN}</{prefix}plugins></{prefix}broker>"
        return f"{xml[: m.start()]}{opened}{body}{xml[m.end() :]}"
    p = re.escape(prefix)
    tag = re.compile(rf"<{p}plugins(?=[\s>/])[^>]*?(?P<empty>/?)>")
    found = tag.search(xml, m.end())
    if found is None:
        return f"{xml[: m.end()]}\n    <{prefix}plugins>{BEAN}</{prefix}plugins>{xml[m.end() :]}"
    if found.group("empty"):
        opened = found.group(0)[:-2].rstrip() + ">"
        return f"{xml[: found.start()]}{opened}{BEAN}</{prefix}plugins>{xml[found.end() :]}"
    return f"{xml[: found.end()]}{BEAN}{xml[found.end() :]}"
