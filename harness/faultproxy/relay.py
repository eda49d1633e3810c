"""The TCP relay: proxies (listeners), connections, and the two directions of each connection.

Each accepted client gets one upstream connection and two `Direction`s: `upstream` (client ->
server) and `downstream` (server -> client); a `Direction` is not a `harness.deploy.plan.Link` (a proxied
route of the plan). A direction with no active toxic relays in `data_received` straight to the
other socket (the fast path). Once a toxic is active, or bytes are still queued, chunks go through
a FIFO queue and one pump task per direction that passes each chunk through its toxic runs in
order, so adding or removing toxics mid-stream neither loses nor reorders bytes. Reading from a
socket pauses while its direction has too much queued or the destination's write buffer is full
(backpressure end to end).

End of stream is relayed as a half-close (FIN, `write_eof`); the connection is closed once both
directions have ended or one socket is gone.

Over 500 lines because the three classes share one flow-control state machine (pause/resume,
half-close, teardown) whose steps only read correctly side by side.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import struct
import time
from collections import Counter, deque
from typing import Any, cast

from harness.faultproxy.toxics import ApiError, Toxic, ToxicRun, make_run

log = logging.getLogger("faultproxy")

QUEUE_HIGH_WATER = 1 << 20  # bytes queued in a link before its source stops reading
WRITE_HIGH_WATER = 1 << 20  # bytes buffered towards a socket before its source stops reading
ACCEPT_BUCKET_S = 0.1


def split_hostport(addr: str, what: str) -> tuple[str, int]:
    """'host:port', '[v6]:port' or ':port' -> (host, port); ApiError 400 if malformed."""
    if not isinstance(addr, str) or ":" not in addr:
        raise ApiError(400, f"bad {what} address {addr!r}: expected host:port")
    host, _, port_s = addr.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_s)
    except ValueError:
        raise ApiError(400, f"bad {what} address {addr!r}: port is not a number") from None
    if not 0 <= port <= 65535:
        raise ApiError(400, f"bad {what} address {addr!r}: port out of range")
    return host, port


_ANY = ("", "0.0.0.0", "::")
_LOOPBACK = ("localhost", "::1", "0:0:0:0:0:0:0:1")


def _local(host: str) -> str:
    """'any' (a wildcard listen), 'loopback', or the host itself, lowercased."""
    h = host.strip("[]").lower()
    if h in _ANY:
        return "any"
    if h in _LOOPBACK or h.startswith("127.") or h.endswith(".localhost"):
        return "loopback"
    return h


def same_endpoint(upstream: str, listen: str) -> bool:
    """Whether dialling `upstream` reaches a socket listening on `listen` (127.0.0.1, localhost,
    ::1 and the wildcards 0.0.0.0/:: counted as one machine; other names compared as written)."""
    try:
        uh, up = split_hostport(upstream, "upstream")
        lh, lp = split_hostport(listen, "listen")
    except ApiError:
        return False
    if up != lp or up == 0:
        return False
    u, ln = _local(uh), _local(lh)
    if u == "any":
        u = "loopback"  # dialling 0.0.0.0 reaches the local machine
    return ln == "any" or u == ln


def join_hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class _Side(asyncio.Protocol):
    """One socket of a relayed connection (the client's or the upstream's)."""

    def __init__(self, conn: Connection, role: str) -> None:
        self.conn = conn
        self.role = role
        self.transport: asyncio.Transport | None = None
        self.write_paused = False
        self.reading = True
        self.lost = False
        self.out_link: Direction  # the link reading from this side
        self.in_link: Direction  # the link writing to this side
        self._drain: asyncio.Future[None] | None = None

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not an asyncio.Transport subclass
        self.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        self.conn.side_made(self)

    def data_received(self, data: bytes) -> None:
        self.out_link.feed(data)

    def eof_received(self) -> bool:
        self.out_link.feed_eof()
        return True  # keep the socket open for the other direction (half-close)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._wake()
        self.conn.side_lost(self)

    def pause_writing(self) -> None:
        self.write_paused = True
        self.in_link.update_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        self._wake()
        self.in_link.update_reading()

    # -- helpers
    def _wake(self) -> None:
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)
        self._drain = None

    async def drained(self) -> None:
        if self.write_paused and not self.lost:
            if self._drain is None:
                self._drain = self.conn.loop.create_future()
            await self._drain

    def set_reading(self, on: bool) -> None:
        t = self.transport
        if t is None or on == self.reading or t.is_closing():
            return
        self.reading = on
        if on:
            t.resume_reading()
        else:
            t.pause_reading()

    def usable(self) -> bool:
        return self.transport is not None and not self.lost and not self.transport.is_closing()


class Direction:
    """One direction of a connection, with its toxic runs."""

    def __init__(self, conn: Connection, stream: str, src: _Side, dst: _Side, rng: random.Random) -> None:
        self.conn = conn
        self.stream = stream
        self.src = src
        self.dst = dst
        self.rng = rng
        self.loop = conn.loop
        self.runs: list[ToxicRun] = []
        self.active = False
        self.queue: deque[tuple[float, bytes | None]] = deque()
        self.queued = 0
        self.pump: asyncio.Task[None] | None = None
        self.eof_in = False
        self.done = False
        src.out_link = self
        dst.in_link = self

    # -- LinkLike for toxics
    def close_connection(self) -> None:
        self.conn.close()

    def reset_connection(self) -> None:
        self.conn.reset()

    # -- data path
    def feed(self, data: bytes) -> None:
        if self.done:
            return
        if not self.active and self.pump is None and not self.queue and self.conn.ready:
            self.dst.transport.write(data)  # type: ignore[union-attr]
            if self.dst.write_paused:
                self.update_reading()
            return
        self.queue.append((self.loop.time(), data))
        self.queued += len(data)
        self.update_reading()
        self._kick()

    def feed_eof(self) -> None:
        if self.eof_in or self.done:
            return
        self.eof_in = True
        if not self.active and self.pump is None and not self.queue and self.conn.ready:
            self._deliver_eof()
            return
        self.queue.append((self.loop.time(), None))
        self._kick()

    def update_reading(self) -> None:
        want = self.conn.ready and not self.dst.write_paused and self.queued <= QUEUE_HIGH_WATER
        self.src.set_reading(want or self.done)

    def _kick(self) -> None:
        if self.pump is None and self.queue and not self.done and self.conn.ready:
            self.pump = self.loop.create_task(self._run())

    async def _run(self) -> None:
        try:
            while self.queue and not self.done:
                arrived, data = self.queue.popleft()
                runs = [r for r in self.runs if r.active]
                if data is None:
                    await self._eof(runs)
                    return
                self.queued -= len(data)
                self.update_reading()
                await self._emit(runs, 0, data, arrived)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("link %s of %s failed", self.stream, self.conn.label)
            self.conn.close()
        finally:
            self.pump = None

    async def _emit(self, runs: list[ToxicRun], i: int, data: bytes, arrived: float) -> None:
        while i < len(runs) and runs[i].detached:
            i += 1
        if i == len(runs):
            if self.done or not self.dst.usable():
                return
            self.dst.transport.write(data)  # type: ignore[union-attr]
            if self.dst.write_paused:
                self.update_reading()
                await self.dst.drained()
            return

        async def nxt(piece: bytes) -> None:
            await self._emit(runs, i + 1, piece, arrived)

        await runs[i].process(data, arrived, nxt)

    async def _eof(self, runs: list[ToxicRun]) -> None:
        for run in runs:
            if run.detached:
                continue
            if not await run.on_eof():
                return
        self._deliver_eof()

    def _deliver_eof(self) -> None:
        if self.done:
            return
        self.done = True
        if self.dst.usable():
            t = self.dst.transport
            assert t is not None
            if t.can_write_eof():
                t.write_eof()
            else:
                t.close()
        self.conn.link_done()

    def abandon(self) -> None:
        """The destination is gone: nothing more can be delivered."""
        self.done = True
        self.queue.clear()
        self.queued = 0
        if self.pump is not None:
            self.pump.cancel()
        self.src.set_reading(True)  # drain and drop what the source still sends

    # -- toxics
    def add_run(self, toxic: Toxic, roll: float) -> None:
        run = make_run(toxic, self, roll)
        self.runs.append(run)
        if run.active:
            run.attach()
        self._recompute()

    def remove_run(self, name: str, closing: bool = False) -> None:
        for run in list(self.runs):
            if run.toxic.name == name:
                self.runs.remove(run)
                self._recompute()
                run.detach(closing=closing or not run.active)

    def replace_run(self, toxic: Toxic, roll: float) -> None:
        for idx, run in enumerate(self.runs):
            if run.toxic is toxic:
                new = make_run(toxic, self, roll)
                self.runs[idx] = new
                run.detach(closing=True)
                if new.active:
                    new.attach()
                self._recompute()
                return

    def _recompute(self) -> None:
        self.active = any(r.active for r in self.runs)
        if self.active is False and self.queue:
            self._kick()

    def shutdown(self) -> None:
        for run in self.runs:
            run.detach(closing=True)
        self.runs.clear()
        self.active = False
        self.done = True
        self.queue.clear()
        self.queued = 0
        if self.pump is not None and self.pump is not asyncio.current_task():
            self.pump.cancel()


class Connection:
    loop: asyncio.AbstractEventLoop
    label: str
    ready: bool

    def __init__(self, proxy: Proxy, seq: int) -> None:
        self.proxy = proxy
        self.seq = seq
        self.loop = proxy.loop
        self.label = f"{proxy.name}#{seq}"
        self.ready = False
        self.closed = False
        self.client = _Side(self, "client")
        self.upstream = _Side(self, "upstream")
        base = f"{proxy.seed}/{proxy.name}/{seq}"  # same seed, proxy and connection number: same rolls
        self.base_seed = base
        self.up = Direction(self, "upstream", self.client, self.upstream, random.Random(base + "/upstream"))
        self.down = Direction(
            self, "downstream", self.upstream, self.client, random.Random(base + "/downstream")
        )
        self._connect_task: asyncio.Task[None] | None = None
        self.peer = ""

    def link(self, stream: str) -> Direction:
        return self.up if stream == "upstream" else self.down

    def roll(self, toxic: Toxic) -> float:
        """This connection's toxicity roll for `toxic` (reproducible for a given --seed)."""
        if toxic.toxicity >= 1.0:
            return 0.0
        return random.Random(f"{self.base_seed}/{toxic.stream}/{toxic.name}/{toxic.generation}").random()

    def side_made(self, side: _Side) -> None:
        side.set_reading(False)  # until the upstream is connected and the toxics are attached
        if side is self.client:
            assert side.transport is not None
            peer = side.transport.get_extra_info("peername")
            self.peer = join_hostport(str(peer[0]), int(peer[1])) if peer else "?"
            self.proxy.conns.add(self)
            self._connect_task = self.loop.create_task(self._connect())

    async def _connect(self) -> None:
        host, port = split_hostport(self.proxy.upstream, "upstream")
        try:
            await self.loop.create_connection(lambda: self.upstream, host or "127.0.0.1", port)
        except (OSError, asyncio.CancelledError) as exc:
            if not self.closed:
                log.info(
                    "%s: upstream %s unreachable (%s); closing client", self.label, self.proxy.upstream, exc
                )
            self.close()
            return
        finally:
            self._connect_task = None
        if self.closed:
            if self.upstream.transport is not None:
                self.upstream.transport.abort()
            return
        self.ready = True
        log.debug("%s: accepted client %s", self.label, self.peer)
        for toxic in self.proxy.toxics.values():
            self.link(toxic.stream).add_run(toxic, self.roll(toxic))
        for link in (self.up, self.down):
            link.update_reading()
            link._kick()  # anything read before the upstream was connected

    def side_lost(self, side: _Side) -> None:
        if self.closed:
            return
        if not self.ready:
            self.close()
            return
        side.in_link.abandon()
        side.out_link.feed_eof()
        self.link_done()

    def link_done(self) -> None:
        if self.up.done and self.down.done:
            self.close()

    def _sides(self) -> list[_Side]:
        return [self.client, self.upstream]

    def _finish(self) -> bool:
        if self.closed:
            return False
        self.closed = True
        self.ready = False
        if self._connect_task is not None:
            self._connect_task.cancel()
        self.up.shutdown()
        self.down.shutdown()
        self.proxy.conns.discard(self)
        log.debug("%s: closed", self.label)
        return True

    def close(self) -> None:
        """Close both sockets after flushing what was already relayed (FIN)."""
        if self._finish():
            for side in self._sides():
                if side.transport is not None and not side.transport.is_closing():
                    side.transport.close()

    def abort(self) -> None:
        """Close both sockets now, dropping buffered data (proxy disabled or deleted)."""
        if self._finish():
            for side in self._sides():
                if side.transport is not None:
                    side.transport.abort()

    def reset(self) -> None:
        """Reset both sockets (RST, SO_LINGER 0), as Toxiproxy's reset_peer does."""
        if self._finish():
            for side in self._sides():
                t = side.transport
                if t is None:
                    continue
                sock = t.get_extra_info("socket")
                if sock is not None:
                    with contextlib.suppress(OSError, AttributeError):
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                t.abort()


class Proxy:
    """A named listener relaying to one upstream, with its toxics."""

    def __init__(self, registry: Registry, name: str, listen: str, upstream: str) -> None:
        self.registry = registry
        self.loop = registry.loop
        self.seed = registry.seed
        self.name = name
        self.listen = listen
        self.requested_listen = listen
        self.upstream = upstream
        self.enabled = False
        self.toxics: dict[str, Toxic] = {}
        self.server: asyncio.base_events.Server | None = None
        self.conns: set[Connection] = set()
        self.seq = 0
        # accepted client connections per ACCEPT_BUCKET_S of wall time (a fleet's reconnect storm)
        self.accepts: Counter[int] = Counter()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "listen": self.listen,
            "upstream": self.upstream,
            "enabled": self.enabled,
            "toxics": [t.to_json() for t in self.toxics.values()],
        }

    def _new_connection(self) -> _Side:
        self.seq += 1
        self.accepts[int(time.time() / ACCEPT_BUCKET_S)] += 1
        return Connection(self, self.seq).client

    async def start(self) -> None:
        if self.server is not None:
            self.enabled = True
            return
        host, port = split_hostport(self.listen, "listen")
        try:
            infos = await self.loop.getaddrinfo(
                host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
        except OSError as exc:
            raise ApiError(400, f"bad listen address {self.listen!r}: {exc}") from None
        family, type_, proto, _, addr = infos[0]
        sock = socket.socket(family, type_, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
            sock.listen(512)
        except OSError as exc:
            sock.close()
            raise ApiError(409, f"listen tcp {self.listen}: {exc.strerror or exc}") from None
        sock.setblocking(False)
        self.server = await self.loop.create_server(self._new_connection, sock=sock)
        bound = sock.getsockname()
        self.listen = join_hostport(str(bound[0]), int(bound[1]))
        self.enabled = True
        log.info("proxy %s listening on %s -> %s", self.name, self.listen, self.upstream)

    def stop(self) -> None:
        """Stop listening and drop every connection of this proxy."""
        self.enabled = False
        if self.server is not None:
            self.server.close()
            self.server = None
            log.info("proxy %s stopped", self.name)
        for conn in list(self.conns):
            conn.abort()

    # -- toxics
    def add_toxic(self, toxic: Toxic) -> None:
        if toxic.name in self.toxics:
            raise ApiError(409, "toxic already exists")
        self.toxics[toxic.name] = toxic
        for conn in list(self.conns):
            if conn.ready:
                conn.link(toxic.stream).add_run(toxic, conn.roll(toxic))
        log.info("proxy %s: added toxic %s", self.name, toxic.to_json())

    def update_toxic(self, name: str, body: Any) -> Toxic:
        toxic = self.get_toxic(name)
        toxicity, attributes = toxic.merged(body)
        reroll = toxicity != toxic.toxicity
        toxic.toxicity = toxicity
        toxic.attributes = attributes
        toxic.generation += 1
        for conn in list(self.conns):
            if not conn.ready:
                continue
            link = conn.link(toxic.stream)
            if reroll:
                link.replace_run(toxic, conn.roll(toxic))
            else:
                for run in link.runs:
                    if run.toxic is toxic and run.active:
                        run.updated()
        log.info("proxy %s: updated toxic %s", self.name, toxic.to_json())
        return toxic

    def remove_toxic(self, name: str) -> None:
        toxic = self.get_toxic(name)
        del self.toxics[name]
        for conn in list(self.conns):
            if conn.ready:
                conn.link(toxic.stream).remove_run(name)
        log.info("proxy %s: removed toxic %s", self.name, name)

    def get_toxic(self, name: str) -> Toxic:
        try:
            return self.toxics[name]
        except KeyError:
            raise ApiError(404, "toxic not found") from None


class Registry:
    """All proxies of one server."""

    def __init__(self, loop: asyncio.AbstractEventLoop, seed: int) -> None:
        self.loop = loop
        self.seed = seed
        self.proxies: dict[str, Proxy] = {}

    def get(self, name: str) -> Proxy:
        try:
            return self.proxies[name]
        except KeyError:
            raise ApiError(404, "proxy not found") from None

    def check_loop(self, name: str, listen: str, upstream: str) -> None:
        """ApiError 400 when `upstream` is this proxy's own listen address or another proxy's:
        every connection would dial the proxy again, until no file descriptor is left."""
        if same_endpoint(upstream, listen):
            raise ApiError(400, f"proxy {name}: upstream {upstream} is its own listen address (a loop)")
        for other in self.proxies.values():
            if other.name != name and same_endpoint(upstream, other.listen):
                raise ApiError(
                    400,
                    f"proxy {name}: upstream {upstream} is the listen address of proxy {other.name} "
                    "(proxies may not point at proxies)",
                )

    async def _start_checked(self, proxy: Proxy) -> None:
        """Start `proxy`; refused (and stopped) when its bound address closes a loop."""
        self.check_loop(proxy.name, proxy.listen, proxy.upstream)
        await proxy.start()
        try:
            self.check_loop(proxy.name, proxy.listen, proxy.upstream)
        except ApiError:
            proxy.stop()
            raise

    async def create(self, body: Any) -> Proxy:
        name, listen, upstream, enabled = _proxy_fields(body)
        if name in self.proxies:
            raise ApiError(409, "proxy already exists")
        proxy = Proxy(self, name, listen, upstream)
        if enabled:
            await self._start_checked(proxy)
        else:
            self.check_loop(name, listen, upstream)
        self.proxies[name] = proxy
        return proxy

    async def update(self, name: str, body: Any) -> Proxy:
        proxy = self.get(name)
        if not isinstance(body, dict):
            raise ApiError(400, "bad request body: expected a JSON object")
        listen = body.get("listen") or proxy.listen
        upstream = body.get("upstream") or proxy.upstream
        enabled = body.get("enabled", proxy.enabled)
        if not isinstance(listen, str) or not isinstance(upstream, str) or not isinstance(enabled, bool):
            raise ApiError(400, "bad request body: listen/upstream must be strings, enabled a boolean")
        split_hostport(listen, "listen")
        split_hostport(upstream, "upstream")
        self.check_loop(name, listen, upstream)
        if listen != proxy.listen or upstream != proxy.upstream:
            # Toxiproxy: changing listen or upstream restarts the proxy, dropping connections.
            was_enabled = proxy.enabled
            old = (proxy.listen, proxy.requested_listen, proxy.upstream)
            proxy.stop()
            proxy.listen, proxy.requested_listen, proxy.upstream = listen, listen, upstream
            if enabled:
                try:
                    await self._start_checked(proxy)
                except ApiError:
                    # refused (e.g. port in use): the proxy stays as it was
                    proxy.listen, proxy.requested_listen, proxy.upstream = old
                    if was_enabled:
                        await proxy.start()
                    raise
        if enabled and not proxy.enabled:
            await proxy.start()
        elif not enabled and proxy.enabled:
            proxy.stop()
        return proxy

    def delete(self, name: str) -> None:
        proxy = self.get(name)
        proxy.stop()
        del self.proxies[name]
        log.info("proxy %s deleted", name)

    async def populate(self, body: Any) -> tuple[list[Proxy], ApiError | None]:
        if not isinstance(body, list):
            raise ApiError(400, "bad request body: expected a JSON array of proxies")
        specs = []
        for i, item in enumerate(body):
            try:
                specs.append(_proxy_fields(item))
            except ApiError as exc:
                raise ApiError(exc.status, f"{exc.message} (proxy {i + 1})") from None
            if specs[-1][0] in [s[0] for s in specs[:-1]]:
                raise ApiError(400, f"duplicate proxy name {specs[-1][0]!r} (proxy {i + 1})")
        done: list[Proxy] = []
        for name, listen, upstream, enabled in specs:
            existing = self.proxies.get(name)
            if existing is not None:
                if upstream == existing.upstream and listen in (existing.listen, existing.requested_listen):
                    done.append(existing)  # unchanged: left alone
                    continue
                self.delete(name)
            proxy = Proxy(self, name, listen, upstream)
            try:
                if enabled:
                    await self._start_checked(proxy)
                else:
                    self.check_loop(name, listen, upstream)
            except ApiError as exc:
                return done, exc
            self.proxies[name] = proxy
            done.append(proxy)
        return done, None

    async def reset(self) -> None:
        error: ApiError | None = None
        for proxy in list(self.proxies.values()):
            for name in list(proxy.toxics):
                proxy.remove_toxic(name)
            if not proxy.enabled:
                try:
                    await proxy.start()
                except ApiError as exc:
                    error = error or exc
        if error is not None:
            raise error

    def shutdown(self) -> None:
        for proxy in self.proxies.values():
            proxy.stop()


def _proxy_fields(body: Any) -> tuple[str, str, str, bool]:
    if not isinstance(body, dict):
        raise ApiError(400, "bad request body: expected a JSON object")
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise ApiError(400, "missing required field: name")
    upstream = body.get("upstream")
    if not isinstance(upstream, str) or not upstream:
        raise ApiError(400, "missing required field: upstream")
    listen = body.get("listen")
    if listen is None or listen == "":
        listen = "127.0.0.1:0"
    if not isinstance(listen, str):
        raise ApiError(400, "bad request body: listen must be a string")
    enabled = body.get("enabled", True)
    if enabled is None:
        enabled = True
    if not isinstance(enabled, bool):
        raise ApiError(400, "bad request body: enabled must be a boolean")
    split_hostport(listen, "listen")
    split_hostport(upstream, "upstream")
    return name, listen, upstream, enabled
