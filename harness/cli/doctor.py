"""`bfh doctor`: what this machine lacks for each feature of the harness, and how to install it.

Exit 0 when everything the asked features need is there, 2 otherwise. The core (local brokers,
MQTT/STOMP agents, the Spark reconciliation) is always asked; `--need docker,java-agent,html` or
`--need all` adds the optional features. Nothing is started: every check is a file lookup or a
`--version`-style call with a timeout. Debian packages per feature: docs/install.md.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

JAVA_LIBS = Path("/usr/share/java")
OPTIONAL = ("docker", "java-agent", "html")
APT = "sudo apt-get install -y --no-install-recommends"


@dataclass
class Check:
    feature: str
    what: str
    ok: bool
    detail: str  # what was found, or how to install it


def _run(argv: list[str], timeout: float = 20) -> tuple[int, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 127, type(e).__name__
    return p.returncode, (p.stderr or p.stdout).strip()


def java_major(version_line: str) -> int | None:
    """17 from 'openjdk version "17.0.15" 2025-04-15'; 8 from '... "1.8.0_392"'."""
    m = re.search(r'version "(\d+)(?:\.(\d+))?', version_line)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def _java() -> Check:
    java_home = os.environ.get("JAVA_HOME")
    exe = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    how = f"{APT} openjdk-17-jre-headless (or set JAVA_HOME to a Java 17+ install)"
    if not exe or not Path(exe).exists():
        return Check("core", "Java 17+ (brokers, Spark)", False, f"not found; {how}")
    rc, out = _run([exe, "-version"])
    first = out.splitlines()[0] if out else "?"
    major = java_major(first)
    if rc != 0 or major is None or major < 17:
        return Check("core", "Java 17+ (brokers, Spark)", False, f"{exe}: {first}; {how}")
    return Check("core", "Java 17+ (brokers, Spark)", True, f"{exe}: {first}")


def _activemq() -> list[Check]:
    home = Path(os.environ.get("ACTIVEMQ_HOME") or "/usr/share/activemq")
    jar = home / "bin" / "activemq.jar"
    out = [
        Check(
            "core",
            "ActiveMQ 5.x",
            jar.is_file(),
            str(home) if jar.is_file() else f"{jar} missing; {APT} activemq (or set ACTIVEMQ_HOME)",
        )
    ]
    jars = ("mqtt-client.jar", "hawtdispatch.jar", "hawtdispatch-transport.jar")
    missing = [j for j in jars if not (JAVA_LIBS / j).exists()]
    out.append(
        Check(
            "core",
            "ActiveMQ MQTT connector jars",
            not missing,
            f"{JAVA_LIBS}/{{{','.join(jars)}}}"
            if not missing
            else f"missing {', '.join(missing)}; {APT} libmqtt-client-java libhawtdispatch-java",
        )
    )
    return out


def _python_deps() -> Check:
    mods = ("pyspark", "paho.mqtt", "stomp", "pandas", "pyarrow", "pydantic", "yaml", "jinja2", "rich")
    missing = []
    for m in mods:
        try:
            importlib.import_module(m)
        except Exception:
            missing.append(m)
    detail = (
        f"{len(mods)} modules importable"
        if not missing
        else f"cannot import {', '.join(missing)}; pip install broker-failover-harness"
    )
    return Check("core", "Python dependencies", not missing, detail)


def _package_data() -> Check:
    """Templates and example topologies, read through the installed package (not a checkout)."""
    root = resources.files("harness")
    want = [root / "templates" / "activemq.xml.j2", root / "templates" / "report.html.j2"]
    topologies = [p for p in (root / "topologies").iterdir() if p.name.endswith(".yaml")]
    missing = [str(p) for p in want if not p.is_file()]
    if missing or not topologies:
        return Check("core", "package data", False, f"missing {missing or 'topologies'}; reinstall bfh")
    return Check("core", "package data", True, f"{root} ({len(topologies)} topologies)")


def _docker() -> list[Check]:
    exe = shutil.which("docker")
    how = f"{APT} docker.io (and add your user to the docker group)"
    if not exe:
        return [Check("docker", "Docker daemon", False, f"docker not found; {how}")]
    rc, out = _run([exe, "version", "--format", "{{.Server.Version}}"])
    ok = rc == 0 and bool(out) and "error" not in out.lower()
    checks = [Check("docker", "Docker daemon", ok, f"server {out}" if ok else f"not reachable: {out[:120]}")]
    try:
        importlib.import_module("docker")
        checks.append(Check("docker", "docker (Python)", True, "importable"))
    except Exception:
        how = "pip install 'broker-failover-harness[docker]'"
        checks.append(Check("docker", "docker (Python)", False, how))
    mm = shutil.which("mmdebstrap")
    checks.append(Check("docker", "mmdebstrap (image builds)", bool(mm), mm or f"{APT} mmdebstrap"))
    return checks


def _java_agent() -> list[Check]:
    javac = shutil.which("javac")
    checks = [
        Check(
            "java-agent",
            "javac (JDK 17)",
            bool(javac),
            javac or f"{APT} openjdk-17-jdk-headless",
        )
    ]
    jars = ("activemq-client.jar", "geronimo-jms_1.1_spec.jar", "hawtbuf.jar", "jackson-databind.jar")
    missing = [j for j in jars if not (JAVA_LIBS / j).exists()]
    checks.append(
        Check(
            "java-agent",
            "OpenWire client jars",
            not missing,
            str(JAVA_LIBS)
            if not missing
            else f"missing {', '.join(missing)}; {APT} libactivemq-java libjackson2-databind-java",
        )
    )
    return checks


def _html() -> list[Check]:
    exe = shutil.which("chromium")
    return [Check("html", "chromium (report page checks)", bool(exe), exe or f"{APT} chromium")]


def checks() -> list[Check]:
    out = [_java(), *_activemq(), _python_deps(), _package_data()]
    out += _docker() + _java_agent() + _html()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="bfh doctor",
        description="check what this machine lacks for the harness and how to install it "
        "(exit 0: all there, 2: something the asked features need is missing)",
    )
    p.add_argument(
        "--need",
        default="",
        help=f"optional features that must be there too: comma-separated {', '.join(OPTIONAL)}, or all",
    )
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    args = p.parse_args(argv)
    need = {n.strip() for n in args.need.split(",") if n.strip()}
    if "all" in need:
        need = set(OPTIONAL)
    unknown = need - set(OPTIONAL)
    if unknown:
        known = ", ".join(OPTIONAL)
        print(f"bfh doctor: unknown feature {sorted(unknown)[0]!r} (known: {known}, all)", file=sys.stderr)
        return 2
    results = checks()
    required = [c for c in results if c.feature == "core" or c.feature in need]
    code = 0 if all(c.ok for c in required) else 2
    if args.json:
        import json

        rows = [{**c.__dict__, "required": c in required} for c in results]
        print(json.dumps({"ok": code == 0, "checks": rows}, indent=2))
        return code
    from rich.console import Console
    from rich.table import Table

    t = Table(title="bfh doctor")
    for col in ("feature", "check", "status", "found / how to install"):
        t.add_column(col, overflow="fold")
    for c in results:
        if c.ok:
            status = "[green]ok[/]"
        elif c in required:
            status = "[red]missing[/]"
        else:
            status = "[yellow]missing (optional)[/]"
        t.add_row(c.feature, c.what, status, c.detail)
    console = Console(emoji=False)
    console.print(t)
    if code:
        console.print("[red]missing[/] items block the features asked; Debian packages: docs/install.md")
    return code
