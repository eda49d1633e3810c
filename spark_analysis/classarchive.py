"""A class-data-sharing archive of Spark's classes for the local JVMs `session.get_spark` starts.

A cold Spark session spends seconds loading and verifying the same thousands of classes; a JDK
dynamic CDS archive (`-XX:ArchiveClassesAtExit`, then `-XX:SharedArchiveFile`) maps them instead:
a cold reconcile of a small run went from 12.3 s to 8.8 s (docs/reconciliation.md).

The archive is machine-local, one per (java, pyspark, jars) in ``$XDG_CACHE_HOME/bfh/spark-cds``.
While none exists, one JVM at a time writes one as it exits (the JVM goes on writing after its
Python process has gone, about 10 s); a later start adopts the finished file. A JVM that finds the
archive does not match (another JDK, other jars) ignores it, so a stale one costs nothing.
``BFH_SPARK_CDS=0`` turns it off; `build()` (scripts/setup.sh) makes it up front.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # its warnings go to the JVM's stdout, the user's terminal
WRITING_S = 600.0  # a writer that has not finished in this long is taken as failed
SETTLED_S = 60.0
# what would make the child a Connect client (the archive is of a local JVM's classes)
LOCAL_ONLY_DROP = (
    "BFH_SPARK_REMOTE",
    "BFH_SPARK_CONNECT_OWNER",
    "SPARK_CONNECT_MODE_ENABLED",
    "SPARK_REMOTE",
    "SPARK_API_MODE",
)  # a written file this old is complete (the JVM writes it in about 10 s)


def _dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "bfh" / "spark-cds"


def _key() -> str:
    import pyspark

    # the java spark-class runs: $JAVA_HOME/bin/java, else the one on PATH
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else (shutil.which("java") or "java")
    jars = Path(pyspark.__file__).parent / "jars"
    h = hashlib.sha256(f"{pyspark.__version__}|{os.path.realpath(java)}".encode())
    for j in sorted(jars.glob("*.jar")):
        h.update(f"|{j.name}:{j.stat().st_size}".encode())
    return h.hexdigest()[:16]


def path() -> Path:
    return _dir() / f"{_key()}.jsa"


def jvm_opts() -> str:
    """Options for a new Spark JVM: use the archive, or write it at exit, or nothing."""
    if os.environ.get("BFH_SPARK_CDS") == "0":
        return ""
    try:
        d, key = _dir(), _key()
        d.mkdir(parents=True, exist_ok=True)
        archive = d / f"{key}.jsa"
        now = time.time()
        for done in d.glob(f"{key}.*.jsa"):  # a writer's finished file: adopt it
            if now - done.stat().st_mtime > SETTLED_S:
                os.replace(done, archive)
                (d / f"{key}.writing").unlink(missing_ok=True)
        if archive.exists():
            return f"-XX:SharedArchiveFile={archive} {QUIET}"
        marker = d / f"{key}.writing"
        with contextlib.suppress(FileNotFoundError):
            if now - marker.stat().st_mtime < WRITING_S:
                return ""  # another JVM is writing it
            marker.unlink()
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        os.close(fd)
        return f"-XX:ArchiveClassesAtExit={d / f'{key}.{os.getpid()}.jsa'} {QUIET}"
    except (OSError, ImportError):  # no cache dir, no pyspark jars: start without
        return ""


def build(timeout: float = 300.0) -> Path | None:
    """Make the archive now (a tiny reconcile in a child process) and wait until it is in place."""
    archive = path()
    if archive.exists():
        return archive
    marker = archive.with_suffix(".writing")
    marker.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in LOCAL_ONLY_DROP}
    code = (
        "import tempfile; from pathlib import Path; from spark_analysis.reconcile import reconcile;"
        "from spark_analysis.testing.synth import tiny_history;"
        "reconcile([tiny_history(Path(tempfile.mkdtemp()) / 'cds')])"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, timeout=timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        written = list(archive.parent.glob(f"{archive.stem}.*.jsa"))
        if written and _stable(written[0]):
            os.replace(written[0], archive)
            marker.unlink(missing_ok=True)
            return archive
        time.sleep(1.0)
    return None


def _stable(p: Path) -> bool:
    """The JVM has finished writing `p`: its size holds for two seconds."""
    size = p.stat().st_size
    time.sleep(2.0)
    return size > 0 and p.stat().st_size == size


if __name__ == "__main__":
    got = build()
    print(f"spark class archive: {got or 'not written'}")
