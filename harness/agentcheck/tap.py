"""The broker's side of the agent's acknowledgements: an MQTT wire tap between the fault proxy and
each broker of the checked group.

The broker witness (harness/witness/) records connections, consumers and producers, never a
message's dispatch or ack, so the check watches the bytes the broker reads and writes instead: each
of the group's MQTT client links is pointed (its fault-proxy upstream) at a relay here that passes
every byte on unchanged and parses MQTT 3.1.1 packets as they pass. When an acknowledgement passes
(the agent's PUBACK of a delivery on its way to the broker; the broker's PUBACK of a publish on its
way to the agent) the relay notes the size of the agent's message log at that instant, before the
bytes go on: a `received` must already be in the file then, a `sent` must not yet be
(harness/agentcheck/acks.py). Faults are unchanged: they act on the proxy and the brokers.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.agentcheck.stomptap import Note, StompConn

CONNECT, PUBLISH, PUBACK, PUBREC, PUBCOMP, SUBSCRIBE = 1, 3, 4, 5, 7, 8


class Tap:
    """Relays on their own event loop thread; `events` is what passed (a list of dicts)."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.events: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="bfh-agentcheck-tap", daemon=True)
        self._servers: list[asyncio.AbstractServer] = []
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread.start()

    def relay(self, url: str, upstream: str, protocol: str = "mqtt") -> str:
        """A relay to `upstream` for the link the agent dials as `url` (`protocol`: mqtt or
        stomp); returns its address."""
        fut = asyncio.run_coroutine_threadsafe(self._listen(url, upstream, protocol), self._loop)
        return fut.result(timeout=10)

    async def _listen(self, url: str, upstream: str, protocol: str) -> str:
        host, _, port = upstream.rpartition(":")

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._connection(reader, writer, url, host, int(port), protocol)

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        self._servers.append(server)
        return f"127.0.0.1:{server.sockets[0].getsockname()[1]}"

    async def _connection(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        url: str,
        host: str,
        port: int,
        protocol: str,
    ) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()  # the broker does not listen: the client sees the close
            return
        self._writers |= {writer, up_writer}
        cid = next(self._ids)

        def note(kind: str, **fields: Any) -> None:
            self.events.append({"t": time.time(), "kind": kind, "conn": cid, "broker": url, **fields})

        conn = StompConn(note, self.log_size) if protocol == "stomp" else _Conn(note, self.log_size)
        await asyncio.gather(
            _pump(reader, up_writer, conn.from_agent), _pump(up_reader, writer, conn.from_broker)
        )
        self._writers -= {writer, up_writer}

    def log_size(self) -> int:
        try:
            return os.stat(self.log_path).st_size
        except OSError:
            return 0

    def stop(self) -> None:
        async def close() -> None:
            for s in self._servers:
                s.close()
            for w in list(self._writers):
                w.close()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as f:
            for e in list(self.events):
                f.write(json.dumps(e, separators=(",", ":")) + "\n")


async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, feed: Any) -> None:
    try:
        while data := await src.read(65536):
            feed(data)  # before the bytes go on: an ack is noted before its receiver has it
            dst.write(data)
            await dst.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        dst.close()


class _Conn:
    """One relayed connection: the MQTT packets of both directions and their packet ids."""

    def __init__(self, note: Note, log_size: Callable[[], int]) -> None:
        self.note, self.log_size = note, log_size
        self.filters: list[str] = []
        self.delivered: dict[int, str | None] = {}  # packet id -> msg_id, broker to agent
        self.published: dict[int, str | None] = {}  # packet id -> msg_id, agent to broker
        self._in, self._out = bytearray(), bytearray()

    def from_agent(self, data: bytes) -> None:
        for kind, flags, body in _packets(self._out, data):
            if kind == PUBLISH:
                pid, msg_id = _publish(flags, body)
                self.note("published", msg_id=msg_id)
                if pid is not None:
                    self.published[pid] = msg_id
            elif kind in (PUBACK, PUBREC) and len(body) >= 2:
                pid = int.from_bytes(body[:2], "big")
                if pid in self.delivered:
                    msg_id = self.delivered.pop(pid)
                    subs = list(self.filters)
                    self.note("delivery_acked", msg_id=msg_id, filters=subs, log_size=self.log_size())
            elif kind == SUBSCRIBE:
                self.filters += _filters(body)
            elif kind == CONNECT:
                self.note("connect", client_id=_client_id(body))

    def from_broker(self, data: bytes) -> None:
        for kind, flags, body in _packets(self._in, data):
            if kind == PUBLISH:
                pid, msg_id = _publish(flags, body)
                if pid is not None:
                    self.delivered[pid] = msg_id
            elif kind in (PUBACK, PUBCOMP) and len(body) >= 2:
                pid = int.from_bytes(body[:2], "big")
                if pid in self.published:
                    msg_id = self.published.pop(pid)
                    self.note("publish_acked", msg_id=msg_id, log_size=self.log_size())


def _packets(buf: bytearray, data: bytes) -> list[tuple[int, int, bytes]]:
    """Complete packets (type, flags, body) from `buf` + `data`; the rest stays in `buf`."""
    buf += data
    out: list[tuple[int, int, bytes]] = []
    while len(buf) >= 2:
        length, mult, i = 0, 1, 1
        while True:
            if i >= len(buf) or i > 4:
                return out
            b = buf[i]
            length += (b & 0x7F) * mult
            mult *= 128
            i += 1
            if not b & 0x80:
                break
        if len(buf) < i + length:
            return out
        out.append((buf[0] >> 4, buf[0] & 0x0F, bytes(buf[i : i + length])))
        del buf[: i + length]
    return out


def _string(body: bytes, at: int) -> tuple[str, int]:
    n = int.from_bytes(body[at : at + 2], "big")
    return body[at + 2 : at + 2 + n].decode("utf-8", "replace"), at + 2 + n


def _publish(flags: int, body: bytes) -> tuple[int | None, str | None]:
    """(packet id or None at QoS 0, the payload's msg_id)."""
    _topic, at = _string(body, 0)
    pid = None
    if (flags >> 1) & 3:
        pid, at = int.from_bytes(body[at : at + 2], "big"), at + 2
    try:
        obj = json.loads(body[at:])
    except (ValueError, UnicodeDecodeError):
        return pid, None
    msg_id = obj.get("msg_id") if isinstance(obj, dict) else None
    return pid, msg_id if isinstance(msg_id, str) else None


def _filters(body: bytes) -> list[str]:
    at, out = 2, []
    while at + 2 <= len(body):
        f, at = _string(body, at)
        out.append(f)
        at += 1  # requested QoS
    return out


def _client_id(body: bytes) -> str:
    _proto, at = _string(body, 0)
    return _string(body, at + 4)[0]  # level, flags, keepalive
