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

The proxies and their registry are in harness.faultproxy.registry, addresses in
harness.faultproxy.addresses.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import struct
from collections import deque
from typing import Protocol, cast

from harness.faultproxy.addresses import join_hostport, same_endpoint, split_hostport
from harness.faultproxy.toxics import Toxic, ToxicRun, make_run

log = logging.getLogger("faultproxy")

QUEUE_HIGH_WATER = 1 << 20  # bytes queued in a link before its source stops reading
WRITE_HIGH_WATER = 1 << 20  # bytes buffered towards a socket before its source stops reading

__all__ = ["Connection", "Direction", "ProxyView", "join_hostport", "same_endpoint", "split_hostport"]


class ProxyView(Protocol):
    """What a Connection reads of its proxy (harness.faultproxy.registry.Proxy, built on this)."""

    name: str
    upstream: str
    seed: int
    loop: asyncio.AbstractEventLoop
    conns: set[Connection]
    toxics: dict[str, Toxic]


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

    def __init__(self, proxy: ProxyView, seq: int) -> None:
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
