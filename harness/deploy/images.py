"""Container images built from Debian packages only: `bfh images build`.

Each image is a bookworm rootfs made by mmdebstrap (minbase, no recommends, no docs) and loaded
with `docker import`. No registry is involved: the apt mirror is the one this machine's own apt
sources name (read at build time, so no host name is written in the repo). The tag carries a hash
of the recipe (packages, hooks, and for the fault proxy its source files), so an image is rebuilt
only when its recipe changes; an existing tag is reused as-is.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SUITE = "bookworm"
ACTIVEMQ_VERSION = "5.17.2"
LABEL = "org.bfh.recipe"
REPO_ROOT = Path(__file__).resolve().parents[2]

# Docs, man pages and locales are never read inside the images: keep the rootfs small.
_DPKG_EXCLUDES = [
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/doc/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/info/*",
]
_CLEANUP = 'rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*'


class ImageError(RuntimeError):
    """An image could not be built (no Docker daemon, no mmdebstrap, apt failure, ...)."""


@dataclass(frozen=True)
class Recipe:
    name: str  # image repository name
    version: str  # upstream version, first part of the tag
    packages: tuple[str, ...]
    hooks: tuple[str, ...] = ()  # mmdebstrap --customize-hook commands ("$1" = rootfs)
    cmd: tuple[str, ...] = ()
    entrypoint: tuple[str, ...] = ()
    workdir: str = "/"
    env: tuple[str, ...] = ()
    files: tuple[Path, ...] = field(default=())  # project files copied in (part of the hash)
    # installed Python packages copied in: (source file, path under /opt/bfh), part of the hash
    site: tuple[tuple[Path, str], ...] = field(default=())

    def digest(self) -> str:
        h = hashlib.sha256()
        spec = {
            "suite": SUITE,
            "packages": self.packages,
            "hooks": self.hooks,
            "cmd": self.cmd,
            "entrypoint": self.entrypoint,
            "workdir": self.workdir,
            "env": self.env,
            "excludes": _DPKG_EXCLUDES,
            "essential-hook": "man1",
        }
        h.update(json.dumps(spec, sort_keys=True).encode())
        for f in sorted(self.files):
            h.update(str(f.relative_to(REPO_ROOT)).encode())
            h.update(f.read_bytes())
        for src, dst in sorted(self.site):
            h.update(dst.encode())
            h.update(src.read_bytes())
        return h.hexdigest()[:12]

    @property
    def tag(self) -> str:
        return f"{self.name}:{self.version}-{self.digest()}"


def activemq_recipe() -> Recipe:
    lib = "/usr/share/activemq/lib"
    # Debian's activemq ships no MQTT codec/transport: put the jars on the broker's own lib/.
    links = " ".join(
        f'ln -sf /usr/share/java/{j} "$1"{lib}/{j};'
        for j in ("mqtt-client.jar", "hawtdispatch.jar", "hawtdispatch-transport.jar")
    )
    return Recipe(
        name="bfh-activemq",
        version=ACTIVEMQ_VERSION,
        packages=("openjdk-17-jre-headless", "activemq", "libmqtt-client-java", "libhawtdispatch-java"),
        hooks=(links, _CLEANUP),
        cmd=("java", "-jar", "/usr/share/activemq/bin/activemq.jar", "start"),
    )


def faultproxy_files() -> tuple[Path, ...]:
    pkg = REPO_ROOT / "harness" / "faultproxy"
    return (REPO_ROOT / "harness" / "__init__.py", *sorted(pkg.glob("*.py")))


def faultproxy_recipe() -> Recipe:
    from harness import __version__

    return Recipe(
        name="bfh-faultproxy",
        version=__version__,
        packages=("python3",),
        hooks=(_CLEANUP,),
        # Toxiproxy's flags after the entrypoint, as with the official image (`-host`, `-config`).
        entrypoint=("python3", "-m", "harness.faultproxy"),
        cmd=("-host", "0.0.0.0", "-port", "8474"),
        workdir="/opt/bfh",
        env=("PYTHONDONTWRITEBYTECODE=1",),
        files=faultproxy_files(),
    )


# The reference agent's third-party packages, copied from this interpreter's site-packages into
# the member image (Debian's python3 is the same 3.11, so pydantic_core's compiled module loads).
MEMBER_PACKAGES = (
    "paho",
    "pydantic",
    "pydantic_core",
    "typing_extensions",
    "annotated_types",
    "typing_inspection",
    "stomp",
    "docopt",
    "websocket",
)


def _package_files(names: tuple[str, ...]) -> tuple[tuple[Path, str], ...]:
    import importlib.util

    out: list[tuple[Path, str]] = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise ImageError(f"the member image needs the Python package {name!r}: not installed")
        if spec.submodule_search_locations:
            root = Path(next(iter(spec.submodule_search_locations)))
            out += [
                (f, f"site/{name}/{f.relative_to(root).as_posix()}")
                for f in sorted(root.rglob("*"))
                if f.is_file() and "__pycache__" not in f.parts
            ]
        else:
            out.append((Path(spec.origin), f"site/{Path(spec.origin).name}"))
    return tuple(out)


def member_files() -> tuple[Path, ...]:
    """The reference agent, the log contract it writes and the swarm member's entrypoint."""
    agents = sorted(p for p in (REPO_ROOT / "agent_under_test").rglob("*.py") if "__pycache__" not in p.parts)
    own = ("harness/__init__.py", "harness/contracts/__init__.py", "harness/contracts/msglog.py")
    return (*agents, *(REPO_ROOT / f for f in own), REPO_ROOT / "harness/backends/swarmmember.py")


def member_base_recipe() -> Recipe:
    """The swarm member's base (harness/backends/swarm.py): python3, libfaketime (a member whose
    clock is shifted on purpose) and the reference agent's packages. The project's own files go
    on top in a layer of their own (`build_member`), so editing the agent takes seconds."""
    return Recipe(
        name="bfh-member-base",
        version=SUITE,
        packages=("python3", "libfaketime"),
        hooks=(_CLEANUP,),
        workdir="/opt/bfh",
        env=("PYTHONDONTWRITEBYTECODE=1", "PYTHONPATH=/opt/bfh:/opt/bfh/site"),
        site=_package_files(MEMBER_PACKAGES),
    )


MEMBER_NAME = "bfh-member"
MEMBER_ENTRYPOINT = ("python3", "/opt/bfh/harness/backends/swarmmember.py")


def member_tag() -> str:
    h = hashlib.sha256(member_base_recipe().tag.encode())
    h.update(json.dumps(MEMBER_ENTRYPOINT).encode())
    for f in member_files():
        h.update(str(f.relative_to(REPO_ROOT)).encode())
        h.update(f.read_bytes())
    from harness import __version__

    return f"{MEMBER_NAME}:{__version__}-{h.hexdigest()[:12]}"


def build_member(force: bool = False) -> tuple[str, bool, float]:
    """The member image: the base (mmdebstrap, cached) plus a layer of the project's files, made by
    `docker build` from the local base (no registry, no pull)."""
    import io
    import tarfile

    t0 = time.monotonic()
    base, _, _ = build(member_base_recipe(), force=force)
    tag = member_tag()
    if not force and image_exists(tag):
        return tag, False, time.monotonic() - t0
    dockerfile = "\n".join(
        [f"FROM {base}", "COPY . /opt/bfh/", f"ENTRYPOINT {json.dumps(list(MEMBER_ENTRYPOINT))}", ""]
    )
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        for f in member_files():
            tar.add(str(f), arcname=f.relative_to(REPO_ROOT).as_posix())
    buf.seek(0)
    client = docker_client()
    client.images.build(fileobj=buf, custom_context=True, tag=tag, pull=False, rm=True, forcerm=True)
    client.images.get(tag).tag(MEMBER_NAME, tag.split(":")[1].split("-")[0])
    return tag, True, time.monotonic() - t0


def recipes() -> dict[str, Recipe]:
    return {"activemq": activemq_recipe(), "faultproxy": faultproxy_recipe(), "member": member_base_recipe()}


def apt_sources() -> list[str]:
    """This machine's apt source files (mmdebstrap reads a sources.list or deb822 file as mirror)."""
    found = [Path("/etc/apt/sources.list")] + sorted(Path("/etc/apt/sources.list.d").glob("*"))
    files = [
        str(f)
        for f in found
        if f.is_file() and f.suffix in (".list", ".sources") and "deb" in f.read_text(errors="replace")
    ]
    if not files:
        raise ImageError(
            "no apt sources on this machine (/etc/apt/sources.list{,.d}): no mirror to build from"
        )
    return files


def docker_client(timeout: int = 300) -> Any:
    """The Docker SDK client, checked with a ping (ImageError when no daemon answers)."""
    import docker

    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as e:
        raise ImageError(f"no Docker daemon answers ({type(e).__name__}: {e})") from None
    return client


def image_exists(tag: str) -> bool:
    import docker.errors

    try:
        docker_client().images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _rootfs(recipe: Recipe, out: Path, stage: Path | None) -> None:
    tool = shutil.which("mmdebstrap")
    if tool is None:
        raise ImageError(
            "mmdebstrap not found: install it (scripts/setup.sh does: apt-get install mmdebstrap)"
        )
    cmd = [
        tool,
        "--variant=minbase",
        "--quiet",
        "--include=" + ",".join(recipe.packages),
        "--aptopt=APT::Install-Recommends false",
    ]
    cmd += [f"--dpkgopt={x}" for x in _DPKG_EXCLUDES]
    # openjdk's postinst registers man pages with update-alternatives: their folder must exist.
    cmd.append('--essential-hook=mkdir -p "$1"/usr/share/man/man1')
    if stage is not None:
        cmd.append(f'--customize-hook=mkdir -p "$1"/opt/bfh && cp -a {stage}/. "$1"/opt/bfh/')
    cmd += [f"--customize-hook={h}" for h in recipe.hooks]
    cmd += [SUITE, str(out), *apt_sources()]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ImageError(
            f"mmdebstrap failed for {recipe.name} (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
        )


def build(recipe: Recipe, force: bool = False) -> tuple[str, bool, float]:
    """Build `recipe` unless its tag exists; returns (tag, built, seconds)."""
    t0 = time.monotonic()
    docker_client()
    # One build per recipe at a time (parallel test workers all ask for the image at start).
    lock = Path(tempfile.gettempdir()) / f"bfh-image-{recipe.name}.lock"
    with lock.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        if not force and image_exists(recipe.tag):
            return recipe.tag, False, time.monotonic() - t0
        _build(recipe)
    return recipe.tag, True, time.monotonic() - t0


def _build(recipe: Recipe) -> None:
    client = docker_client()
    tag = recipe.tag
    with tempfile.TemporaryDirectory(prefix="bfh-image-") as tmp:
        stage = None
        if recipe.files or recipe.site:
            stage = Path(tmp) / "stage"
            pairs = [(f, f.relative_to(REPO_ROOT).as_posix()) for f in recipe.files]
            for f, rel in [*pairs, *recipe.site]:
                dst = stage / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, dst)
        tar = Path(tmp) / "rootfs.tar"
        _rootfs(recipe, tar, stage)
        changes = [
            f"CMD {json.dumps(list(recipe.cmd))}",
            f"WORKDIR {recipe.workdir}",
            *([f"ENTRYPOINT {json.dumps(list(recipe.entrypoint))}"] if recipe.entrypoint else []),
            f"LABEL {LABEL}={recipe.digest()}",
            "LABEL org.bfh.built-by=bfh-images",
        ] + [f"ENV {e}" for e in recipe.env]
        repo, version = tag.split(":")
        client.api.import_image(src=str(tar), repository=repo, tag=version, changes=changes)
    # A stable alias for compose files and humans: <name>:<version> points at the newest build.
    client.images.get(tag).tag(recipe.name, recipe.version)


def build_all(names: list[str] | None = None, force: bool = False) -> dict[str, tuple[str, bool, float]]:
    all_recipes = recipes()
    wanted = names or list(all_recipes)
    unknown = [n for n in wanted if n not in all_recipes]
    if unknown:
        raise ImageError(f"unknown image(s) {unknown}; known: {', '.join(all_recipes)}")
    # "member" is its base recipe plus the project's layer (build_member)
    return {n: build_member(force) if n == "member" else build(all_recipes[n], force=force) for n in wanted}


def member_image() -> str:
    """The swarm member image: `BFH_MEMBER_IMAGE` or our built tag."""
    return os.environ.get("BFH_MEMBER_IMAGE") or member_tag()


def activemq_image() -> str:
    """The ActiveMQ image the docker backend runs: `ACTIVEMQ_IMAGE` or our built tag."""
    return os.environ.get("ACTIVEMQ_IMAGE") or activemq_recipe().tag
