"""Toxic definitions: the API shape (validation, defaults, partial updates) and per-link behaviour.

A `Toxic` is what the API sees: `{name, type, stream, toxicity, attributes}`. A `ToxicRun` is one
toxic attached to one direction ("link") of one relayed connection; it holds that link's state
(toxicity roll, byte counters, timers) and transforms the link's chunks. Runs read the toxic's
attributes live, so an attribute update takes effect on open connections at their next chunk.

Semantics follow Toxiproxy 2.x (see docs/fault-proxy.md):
- latency {latency, jitter} ms: each chunk leaves `latency +/- jitter` after it *arrived*.
- bandwidth {rate} KB/s (1 KB = 1000 bytes): chunks are cut into 100 ms pieces and paced.
- slow_close {delay} ms: the end of the stream is held back by `delay`.
- timeout {timeout} ms: data is dropped; the connection closes after `timeout` ms without input
  (0 = never: a black hole); removing the toxic closes the connections it was holding.
- reset_peer {timeout} ms: on the first input, wait `timeout` then reset both sockets (RST).
- slicer {average_size, size_variation} bytes, {delay} µs: chunks are cut into small pieces.
- limit_data {bytes}: pass that many bytes in total, then close the connection. The builtin
  server's extra attribute `hold` (ms; 0, Toxiproxy's behaviour, by default): keep the connection
  open instead and hold what follows for `hold` ms from the limit, then pass it all on (the
  subscribe handshake entry: CONNECT passes, SUBSCRIBE waits). Its `frames` (0 by default): the
  limit is the link's first `frames` whole MQTT or STOMP frames (frames.py), not `bytes`, so
  the hold starts right after a CONNECT of any length. Toxiproxy ignores both attributes.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from harness.faultproxy.frames import frames_end

STREAMS = ("upstream", "downstream")

TOXIC_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "latency": ("latency", "jitter"),
    "bandwidth": ("rate",),
    "slow_close": ("delay",),
    "timeout": ("timeout",),
    "reset_peer": ("timeout",),
    "slicer": ("average_size", "size_variation", "delay"),
    "limit_data": ("bytes", "hold", "frames"),
    "noop": (),
}

MAX_ATTRIBUTE = 2**62
MAX_HEAD = 1 << 16  # bytes a `frames` limit reads for the first frames' end before it holds anyway


class ApiError(Exception):
    """An error the API answers with `{"error": message, "status": status}`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _check_attributes(type_: str, raw: Any, base: dict[str, int]) -> dict[str, int]:
    if raw is None:
        return dict(base)
    if not isinstance(raw, dict):
        raise ApiError(400, "bad request body: attributes must be a JSON object")
    out = dict(base)
    known = TOXIC_ATTRIBUTES[type_]
    unknown = sorted(str(k) for k in raw if k not in known)
    if unknown:  # a misspelling would otherwise be a toxic that silently does nothing
        raise ApiError(
            400,
            f"bad request body: unknown attribute {unknown[0]!r} for a {type_} toxic "
            f"(attributes: {', '.join(known) or 'none'})",
        )
    for key in known:
        if key not in raw:
            continue
        value = raw[key]
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ApiError(400, f"bad request body: attribute {key} must be an integer")
        if value < 0:
            raise ApiError(400, f"bad request body: attribute {key} must not be negative")
        if value > MAX_ATTRIBUTE:
            raise ApiError(400, f"bad request body: attribute {key} is too large")
        out[key] = value
    return out


def _check_toxicity(raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise ApiError(400, "bad request body: toxicity must be a number")
    if not 0.0 <= raw <= 1.0:
        raise ApiError(400, "bad request body: toxicity must be between 0 and 1")
    return float(raw)


class Toxic:
    """A toxic as the API shows it."""

    def __init__(self, name: str, type_: str, stream: str, toxicity: float, attributes: dict[str, int]):
        self.name = name
        self.type = type_
        self.stream = stream
        self.toxicity = toxicity
        self.attributes = attributes
        self.generation = 0  # bumped by every update; runs re-roll toxicity when it changes

    @classmethod
    def from_json(cls, body: Any) -> Toxic:
        if not isinstance(body, dict):
            raise ApiError(400, "bad request body: expected a JSON object")
        type_ = body.get("type")
        if not isinstance(type_, str) or type_ not in TOXIC_ATTRIBUTES:
            raise ApiError(400, "invalid toxic type")
        stream = body.get("stream")
        if stream is None or stream == "":
            stream = "downstream"
        if not isinstance(stream, str) or stream.lower() not in STREAMS:
            raise ApiError(400, "stream was invalid, can be either upstream or downstream")
        stream = stream.lower()
        name = body.get("name")
        if name is None or name == "":
            name = f"{type_}_{stream}"
        if not isinstance(name, str):
            raise ApiError(400, "bad request body: name must be a string")
        toxicity = _check_toxicity(body["toxicity"]) if body.get("toxicity") is not None else 1.0
        base = dict.fromkeys(TOXIC_ATTRIBUTES[type_], 0)
        attributes = _check_attributes(type_, body.get("attributes"), base)
        return cls(name, type_, stream, toxicity, attributes)

    def merged(self, body: Any) -> tuple[float, dict[str, int]]:
        """Validate a partial update; returns the new (toxicity, attributes) without applying them."""
        if not isinstance(body, dict):
            raise ApiError(400, "bad request body: expected a JSON object")
        toxicity = self.toxicity
        if body.get("toxicity") is not None:
            toxicity = _check_toxicity(body["toxicity"])
        return toxicity, _check_attributes(self.type, body.get("attributes"), self.attributes)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "stream": self.stream,
            "toxicity": self.toxicity,
            "attributes": dict(self.attributes),
        }


class LinkLike(Protocol):
    """What a toxic run needs from the link it is attached to (implemented in relay.py)."""

    rng: random.Random
    loop: asyncio.AbstractEventLoop

    def close_connection(self) -> None: ...

    def reset_connection(self) -> None: ...


Emit = Callable[[bytes], Awaitable[None]]


class ToxicRun:
    """One toxic on one link. The base class passes data through (an inactive roll is this)."""

    def __init__(self, toxic: Toxic, link: LinkLike, active: bool) -> None:
        self.toxic = toxic
        self.link = link
        self.active = active
        self.generation = toxic.generation
        self._wake: set[asyncio.Future[None]] = set()
        self.detached = False

    @property
    def attrs(self) -> dict[str, int]:
        return self.toxic.attributes

    async def sleep(self, seconds: float) -> None:
        """Sleep, but return at once if the toxic is removed meanwhile (the chunk goes on)."""
        if seconds <= 0 or self.detached:
            return
        fut: asyncio.Future[None] = self.link.loop.create_future()
        handle = self.link.loop.call_later(seconds, _resolve, fut)
        self._wake.add(fut)
        try:
            await fut
        finally:
            handle.cancel()
            self._wake.discard(fut)

    def attach(self) -> None:
        """The run starts on its link (new connection, or toxic added/updated mid-stream)."""

    def updated(self) -> None:
        """The toxic's attributes changed."""

    def detach(self, closing: bool = False) -> None:
        """The toxic is removed from the link (or the link ends, `closing`)."""
        self.detached = True
        for fut in list(self._wake):
            _resolve(fut)

    async def process(self, data: bytes, arrived: float, emit: Emit) -> None:
        await emit(data)

    async def on_eof(self) -> bool:
        """The stream ended; return False to swallow the end (the toxic closed the connection)."""
        return True


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class LatencyRun(ToxicRun):
    async def process(self, data: bytes, arrived: float, emit: Emit) -> None:
        delay = self.attrs.get("latency", 0) / 1000.0
        jitter = self.attrs.get("jitter", 0) / 1000.0
        if jitter:
            delay += self.link.rng.uniform(-jitter, jitter)
        await self.sleep(delay - (self.link.loop.time() - arrived))
        await emit(data)


class BandwidthRun(ToxicRun):
    def __init__(self, toxic: Toxic, link: LinkLike, active: bool) -> None:
        super().__init__(toxic, link, active)
        self._next = 0.0

    async def process(self, data: bytes, arrived: float, emit: Emit) -> None:
        rate = self.attrs.get("rate", 0)
        if rate <= 0:
            await emit(data)
            return
        per_second = rate * 1000.0
        piece = max(1, rate * 100)  # 100 ms worth of data
        view = memoryview(data)
        for off in range(0, len(data), piece):
            part = bytes(view[off : off + piece])
            now = self.link.loop.time()
            self._next = max(self._next, now) + len(part) / per_second
            await self.sleep(self._next - now)
            await emit(part)


class SlowCloseRun(ToxicRun):
    async def on_eof(self) -> bool:
        await self.sleep(self.attrs.get("delay", 0) / 1000.0)
        return True


class TimeoutRun(ToxicRun):
    def __init__(self, toxic: Toxic, link: LinkLike, active: bool) -> None:
        super().__init__(toxic, link, active)
        self._timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        ms = self.attrs.get("timeout", 0)
        if ms > 0 and not self.detached:
            self._timer = self.link.loop.call_later(ms / 1000.0, self._expire)

    def _expire(self) -> None:
        self._timer = None
        if not self.detached:
            self.link.close_connection()

    def attach(self) -> None:
        self._arm()

    def updated(self) -> None:
        self._arm()

    def detach(self, closing: bool = False) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        was = self.detached
        super().detach(closing)
        if not closing and not was:
            # Toxiproxy: removing a timeout toxic closes the connections it was holding.
            self.link.close_connection()

    async def process(self, data: bytes, arrived: float, emit: Emit) -> None:
        self._arm()  # idle timer restarts with every chunk; the data is dropped


class ResetPeerRun(ToxicRun):
    async def process(self, data: bytes, arrived: float, emit: Emit) -> None:
        await self.sleep(self.attrs.get("timeout", 0) / 1000.0)
        if not self.detached:
            self.link.reset_connection()
        else:
            await emit(data)

    async def on_eof(self) -> bool:
        await self.sleep(self.attrs.get("timeout", 0) / 1000.0)
        if self.detached:
            return True
        self.link.reset_connection()
        return False


class SlicerRun(ToxicRun):
    async def process(self, data: bytes, arrived: float, emit: Emit) -> None:
        avg = self.attrs.get("average_size", 0)
        if avg <= 0:
            await emit(data)
            return
        var = min(self.attrs.get("size_variation", 0), avg - 1) if avg > 1 else 0
        delay = self.attrs.get("delay", 0) / 1_000_000.0
        view = memoryview(data)
        off = 0
        while off < len(data):
            if off and delay:
                await self.sleep(delay)
            size = avg + (self.link.rng.randint(-var, var) if var else 0)
            await emit(bytes(view[off : off + size]))
            off += size


class LimitDataRun(ToxicRun):
    def __init__(self, toxic: Toxic, link: LinkLike, active: bool) -> None:
        super().__init__(toxic, link, active)
        self.transmitted = 0
        self._release: float | None = None  # with `hold`: when held data goes on
        self._head = b""  # with `frames`: the link's first bytes, until the frames' end is known
        self._frames_end: int | None = None

    def _limit(self, data: bytes) -> int | None:
        """The byte limit: `bytes`, or with `frames` where the first frames end (None: not yet
        known, so `data` is still inside them)."""
        frames = self.attrs.get("frames", 0)
        if not frames:
            return int(self.attrs.get("bytes", 0))
        if self._frames_end is None:
            self._head += data
            self._frames_end = frames_end(self._head, frames)
            if self._frames_end is None and len(self._head) > MAX_HEAD:  # no frame end in sight
                self._frames_end = len(self._head)
            if self._frames_end is not None:
                self._head = b""
        return self._frames_end

    async def process(self, data: bytes, arrived: float, emit: Emit) -> None:
        limit, hold = self._limit(data), self.attrs.get("hold", 0)
        if limit is None:  # inside the first frames: they pass
            self.transmitted += len(data)
            await emit(data)
            return
        remaining = limit - self.transmitted
        head, rest = (
            (data[: max(remaining, 0)], data[max(remaining, 0) :]) if remaining < len(data) else (data, b"")
        )
        if head:
            self.transmitted += len(head)
            await emit(head)
        if self.transmitted < limit:
            return
        if not hold:
            self.link.close_connection()
            return
        if self._release is None:  # chunks queue in order behind this one: they wait too
            self._release = self.link.loop.time() + hold / 1000.0
        if rest:
            await self.sleep(self._release - self.link.loop.time())
            self.transmitted += len(rest)
            await emit(rest)


RUN_TYPES: dict[str, type[ToxicRun]] = {
    "latency": LatencyRun,
    "bandwidth": BandwidthRun,
    "slow_close": SlowCloseRun,
    "timeout": TimeoutRun,
    "reset_peer": ResetPeerRun,
    "slicer": SlicerRun,
    "limit_data": LimitDataRun,
    "noop": ToxicRun,
}


def make_run(toxic: Toxic, link: LinkLike, roll: float) -> ToxicRun:
    """A run for `toxic` on `link`; `roll` in [0, 1) decides whether it is active (toxicity)."""
    active = roll < toxic.toxicity
    cls = RUN_TYPES[toxic.type] if active else ToxicRun
    return cls(toxic, link, active)
