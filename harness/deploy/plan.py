"""A deployment plan: a topology with ports allocated and every connection made a proxied link.

Every client connector and every bridge goes through the fault proxy, so the plan decides the
proxy's listen port of each link before any broker starts (bridge URIs name the proxy ports).

Ports: `free_ports` hands out loopback ports below the kernel's ephemeral range (so no outgoing
connection of any process can be sitting on them) and reserves each in a machine-wide folder
(`$TMPDIR/bfh-ports/<port>`, holding the reserving process's pid and start time), so harnesses
running side by side never get the same port. A reservation lapses when its process is gone;
reservations are taken under an flock of that folder's `.lock`, so a lapsed one is taken over once.

Multicast bridges cannot go through a TCP proxy themselves; instead each target broker's
openwire connector advertises the proxy's address (publishedAddressPolicy portMapping), so the
bridges that discovery builds still pass through a proxied link (`bridge-mcast-to-<broker>`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import random
import socket
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from harness import procs
from harness.deploy.connectors import HOST
from harness.deploy.connectors import connector_uri as connector_uri  # its old home: still importable
from harness.topology import Bridge, Topology, User, bridge_sources, bridge_targets

PORT_RANGE = (20000, 32000)  # below Linux's default ephemeral range (32768-60999)
RESERVATIONS = Path(os.environ.get("BFH_PORT_DIR") or Path(tempfile.gettempdir()) / "bfh-ports")
MULTICAST_TTL = 0  # discovery datagrams never leave this host


@dataclass(frozen=True)
class Link:
    """One proxied connection path: clients (or a bridging broker) -> proxy -> broker connector."""

    name: str
    kind: str  # "client" or "bridge"
    broker: str  # the broker the link leads to
    connector: str
    listen_port: int
    upstream_port: int
    source: str | None = None  # the bridging broker, for bridge links (None: any, for multicast)
    tls: bool = False  # the connector behind the link speaks TLS
    host: str = HOST  # where the proxy listens: a client link's is make_plan's `client_host`

    @property
    def listen(self) -> str:
        return f"{self.host}:{self.listen_port}"

    @property
    def upstream(self) -> str:
        return f"{HOST}:{self.upstream_port}"

    @property
    def url(self) -> str:
        """The address a client puts in `mb.urls` (`ssl://host:port` for TLS, per the contract)."""
        return f"ssl://{self.listen}" if self.tls else self.listen

    def proxy_spec(self) -> dict[str, object]:
        return {"name": self.name, "listen": self.listen, "upstream": self.upstream, "enabled": True}


@dataclass(frozen=True)
class BridgePlan:
    name: str
    source_broker: str
    target_group: str
    uri: str
    spec: Bridge


@dataclass(frozen=True)
class Multicast:
    """A run's multicast discovery settings; groups are named per run so runs never cross-talk."""

    address: str
    port: int
    prefix: str

    def group_name(self, group: str) -> str:
        return f"{self.prefix}-{group}"

    def uri(self, group: str) -> str:
        return f"multicast://{self.address}:{self.port}?group={self.group_name(group)}&timeToLive={MULTICAST_TTL}"


@dataclass(frozen=True)
class BrokerPlan:
    name: str
    group: str
    index: int  # 1-based position in its group; member 1 starts first and becomes master
    ports: dict[str, int]
    base_dir: Path
    store_dir: Path
    # harness-only openwire connector for the broker witness (harness/witness/); never a link,
    # never in mb.urls; None when the plan has none (fixed-port compose plans)
    witness_port: int | None = None

    @property
    def conf_dir(self) -> Path:
        return self.base_dir / "conf"

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def log_file(self) -> Path:
        return self.base_dir / "broker.log"


@dataclass(frozen=True)
class Plan:
    topology: Topology
    run_dir: Path
    brokers: dict[str, BrokerPlan]
    links: list[Link]
    bridges: list[BridgePlan] = field(default_factory=list)
    multicast: Multicast | None = None

    @property
    def tls_dir(self) -> Path:
        """Where the run's throwaway CA, keystores and `ca.pem` live (made by the backend)."""
        return self.run_dir / "tls"

    @property
    def ca_file(self) -> Path:
        return self.tls_dir / "ca.pem"

    @property
    def bridge_user(self) -> User | None:
        return self.topology.bridge_user()

    def members(self, group: str) -> list[BrokerPlan]:
        return sorted((b for b in self.brokers.values() if b.group == group), key=lambda b: b.index)

    def client_link(self, broker: str, connector: str) -> Link:
        for link in self.links:
            if link.kind == "client" and link.broker == broker and link.connector == connector:
                return link
        raise KeyError(f"no {connector} client link to {broker}")

    def client_urls(self, connector: str, group: str | None = None) -> list[str]:
        """Proxy addresses of a group's members in member order (the agent's `mb.urls`).

        `host:port`, or `ssl://host:port` when the connector is TLS (agent.conf contract).
        """
        groups = [group] if group else [g.name for g in self.topology.groups]
        return [self.client_link(b.name, connector).url for g in groups for b in self.members(g)]

    def links_of(self, broker: str) -> list[Link]:
        """Every link that leads to `broker` or leaves it as a bridge."""
        return [lk for lk in self.links if broker in (lk.broker, lk.source)]

    def bridge_links(self, source_group: str | None = None, target_group: str | None = None) -> list[Link]:
        """Bridge links, optionally only those from/to members of the given groups."""
        src = {b.name for b in self.members(source_group)} if source_group else None
        tgt = {b.name for b in self.members(target_group)} if target_group else None
        return [
            lk
            for lk in self.links
            if lk.kind == "bridge"
            and (src is None or lk.source is None or lk.source in src)
            and (tgt is None or lk.broker in tgt)
        ]

    def discovery_link(self, broker: str) -> Link | None:
        """The proxied link a multicast-discovered bridge to `broker` goes through."""
        for lk in self.links:
            if lk.kind == "bridge" and lk.broker == broker and lk.source is None:
                return lk
        return None


# -- ports ---------------------------------------------------------------------------------------

_reserve_lock = threading.Lock()


def _me() -> dict[str, float | int]:
    p = psutil.Process()
    return {"pid": p.pid, "created": p.create_time()}


def _holder_alive(path: Path) -> bool:
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(rec, dict) and procs.alive(rec.get("pid"), rec.get("created", 0.0))


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the JVM and proxy bind
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    # Nothing listening on the wildcard address either.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.05)
        return s.connect_ex((HOST, port)) != 0


@contextlib.contextmanager
def _machine_lock() -> Iterator[None]:
    """Serialises reservations across processes: checking a lapsed reservation and taking it over
    must be one step, or two processes both take it over (and one reads another's file half-written)."""
    path = RESERVATIONS / ".lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666)  # shared by every user of the machine, whatever the umask
    except PermissionError:
        fd = os.open(path, os.O_RDONLY)  # another user's lock file: flock needs no write access
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _reserve(port: int, me: str) -> bool:
    """Take `port`'s reservation file (the caller holds the machine lock)."""
    path = RESERVATIONS / str(port)
    if path.exists():
        if _holder_alive(path):
            return False
        with contextlib.suppress(FileNotFoundError):  # lapsed: take it over
            path.unlink()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(me)
    return True


def release_ports(ports: list[int]) -> None:
    """Drop this process's reservations of `ports` (optional: they lapse when the process ends)."""
    mine = _me()
    for p in ports:
        path = RESERVATIONS / str(p)
        try:
            if json.loads(path.read_text()).get("pid") == mine["pid"]:
                path.unlink()
        except (OSError, ValueError):
            pass


def free_ports(n: int) -> list[int]:
    """n distinct free loopback ports, reserved machine-wide for this process (see module doc)."""
    try:
        RESERVATIONS.mkdir(parents=True, exist_ok=True)
        os.chmod(RESERVATIONS, 0o1777)
    except PermissionError:
        pass
    except OSError as e:
        if e.errno != errno.EPERM:
            raise
    me = json.dumps(_me())
    lo, hi = PORT_RANGE
    out: list[int] = []
    with _reserve_lock, _machine_lock():
        start = random.randrange(lo, hi)
        for k in range(hi - lo):
            port = lo + (start - lo + k) % (hi - lo)
            if _bindable(port) and _reserve(port, me):
                if _bindable(port):
                    out.append(port)
                else:
                    release_ports([port])
            if len(out) == n:
                return out
    release_ports(out)
    raise RuntimeError(f"no {n} free ports left in {lo}-{hi}; stale reservations in {RESERVATIONS}?")


# -- the plan ------------------------------------------------------------------------------------


def _bridge_uri(spec: Bridge, targets: list[str], tls: bool) -> str:
    scheme = "ssl" if tls else "tcp"
    urls = ",".join(f"{scheme}://{t}" for t in targets)
    opts = f"?maxReconnectDelay={spec.reconnect_delay_ms}" if spec.reconnect_delay_ms else ""
    if spec.uri == "masterslave":
        return f"masterslave:({urls}){opts}"
    if spec.uri in ("static-list", "static"):
        return f"static:({urls}){opts}"
    if spec.uri == "failover":
        return f"static:(failover:({urls})?randomize=false&maxReconnectAttempts=0){opts}"
    raise ValueError(f"bridge uri {spec.uri!r} is not a static form")


def _multicast_for(run_dir: Path) -> Multicast:
    h = int.from_bytes(hashlib.sha256(str(run_dir).encode()).digest()[:4], "big")
    return Multicast(
        address=f"239.255.{(h >> 8) & 255}.{h & 255}", port=40000 + (h >> 16) % 20000, prefix=f"bfh{h:08x}"
    )


def _ports_needed(topology: Topology) -> int:
    """Loopback ports to allocate: unpinned connectors, one proxied link per client connection
    and per bridge connection (static: source x target brokers; multicast: each target member)."""
    groups = topology.groups
    n_connector_ports = sum(sum(1 for s in g.connectors.values() if not s.port) * g.size for g in groups)
    n_client_links = sum(len(g.connectors) * g.size for g in groups)
    static_bridges = [b for b in topology.bridges if b.uri != "multicast"]
    n_bridge_links = sum(
        len(bridge_sources(topology, b)) * len(bridge_targets(topology, b)) for b in static_bridges
    )
    n_bridge_links += sum(topology.group(g).size for g in _multicast_targets(topology))
    return n_connector_ports + n_client_links + n_bridge_links


def _multicast_targets(topology: Topology) -> list[str]:
    return sorted({b.target for b in topology.bridges if b.uri == "multicast"})


def _broker_plans(
    topology: Topology, run_dir: Path, pool: Iterator[int], witness: bool
) -> dict[str, BrokerPlan]:
    brokers: dict[str, BrokerPlan] = {}
    for g in topology.groups:
        for i, name in enumerate(g.member_names(), start=1):
            ports = {
                str(c): (spec.port + i - 1 if spec.port else next(pool)) for c, spec in g.connectors.items()
            }
            brokers[name] = BrokerPlan(
                name=name,
                group=g.name,
                index=i,
                ports=ports,
                base_dir=run_dir / "brokers" / name,
                store_dir=run_dir / "brokers" / f"{g.name if g.store == 'shared' else name}-store" / "kahadb",
                witness_port=next(pool) if witness else None,
            )
    return brokers


class _Bridging:
    """The bridges' links and plans, drawing ports from one pool in a fixed order."""

    def __init__(self, topology: Topology, brokers: dict[str, BrokerPlan], pool: Iterator[int]) -> None:
        self.topology = topology
        self.brokers = brokers
        self.pool = pool
        self.links: list[Link] = []
        self.bridges: list[BridgePlan] = []
        self.made: set[str] = set()

    def ow_tls(self, broker: str) -> bool:
        return self.topology.group(self.brokers[broker].group).connectors["openwire"].tls

    def static(self) -> None:
        for k, spec in enumerate(self.topology.bridges):
            if spec.uri == "multicast":
                continue
            prefix = spec.name or f"nc{k}"
            for src in bridge_sources(self.topology, spec):
                target_addrs = []
                tls = False
                for tgt in bridge_targets(self.topology, spec):
                    link = self._static_link(src, tgt, prefix)
                    target_addrs.append(link.listen)
                    tls = tls or link.tls
                uri = _bridge_uri(spec, target_addrs, tls)
                self.bridges.append(
                    BridgePlan(f"{prefix}-{src}-to-{spec.target}", src, spec.target, uri, spec)
                )

    def _static_link(self, src: str, tgt: str, prefix: str) -> Link:
        lname = f"bridge-{src}-to-{tgt}"
        if lname in self.made:  # a second bridge between the same brokers gets its own link
            lname = f"bridge-{src}-to-{tgt}-{prefix}"
        self.made.add(lname)
        port = self.brokers[tgt].ports["openwire"]
        link = Link(lname, "bridge", tgt, "openwire", next(self.pool), port, source=src, tls=self.ow_tls(tgt))
        self.links.append(link)
        return link

    def multicast(self, run_dir: Path) -> Multicast | None:
        targets = _multicast_targets(self.topology)
        mcast = _multicast_for(run_dir) if targets else None
        for g_name in targets:
            for b in (self.brokers[m] for m in self.topology.group(g_name).member_names()):
                self.links.append(
                    Link(
                        f"bridge-mcast-to-{b.name}",
                        "bridge",
                        b.name,
                        "openwire",
                        next(self.pool),
                        b.ports["openwire"],
                        source=None,
                        tls=self.ow_tls(b.name),
                    )
                )
        if mcast is None:
            return None
        for k, spec in enumerate(self.topology.bridges):
            if spec.uri != "multicast":
                continue
            prefix = spec.name or f"nc{k}"
            for src in bridge_sources(self.topology, spec):
                name = f"{prefix}-{src}-to-{spec.target}"
                self.bridges.append(BridgePlan(name, src, spec.target, mcast.uri(spec.target), spec))
        return mcast


def make_plan(
    topology: Topology, run_dir: str | Path, port_pool: Iterator[int] | None = None, client_host: str = HOST
) -> Plan:
    """Allocate every port (free, reserved loopback ports; or from `ports`, for static files such
    as generated compose files) and make every connection a proxied link. `client_host`: where the
    client links listen and what `mb.urls` names (harness.backends.client_host: another node's
    agents need the manager's address); bridges and upstreams stay on loopback."""
    run_dir = Path(run_dir).resolve()
    n_witness = sum(g.size for g in topology.groups) if port_pool is None else 0
    pool = port_pool if port_pool is not None else iter(free_ports(_ports_needed(topology) + n_witness))
    brokers = _broker_plans(topology, run_dir, pool, bool(n_witness))
    links: list[Link] = []
    for b in brokers.values():
        g = topology.group(b.group)
        for c, port in b.ports.items():
            tls = g.connector(c).tls
            link = Link(f"{b.name}-{c}", "client", b.name, c, next(pool), port, tls=tls, host=client_host)
            links.append(link)
    bridging = _Bridging(topology, brokers, pool)
    bridging.static()
    mcast = bridging.multicast(run_dir)
    return Plan(topology, run_dir, brokers, links + bridging.links, bridging.bridges, mcast)
