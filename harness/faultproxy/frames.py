"""Where a stream's first frames end: MQTT (3.1.1 and 5 share the fixed header) or STOMP, told
apart by the first byte. The `limit_data` toxic's `frames` attribute counts whole frames with it,
so a hold starts after the client's CONNECT whatever its client id's length (toxics.py)."""

from __future__ import annotations

MQTT_CONNECT = 0x10  # packet type 1, flags 0
STOMP_FIRST = (b"CONNECT", b"STOMP")  # the frames a STOMP client opens with
EOLS = b"\r\n"  # STOMP heart-beats between frames


def _mqtt_end(buf: bytes, at: int) -> int | None:
    """The end of the MQTT packet starting at `at`: fixed header, remaining length (1-4 bytes of 7
    bits), then that many bytes; None while the bytes do not yet tell."""
    length, shift, i = 0, 0, at + 1
    while True:
        if i >= len(buf):
            return None
        byte = buf[i]
        length |= (byte & 0x7F) << shift
        i += 1
        if not byte & 0x80:
            return i + length
        shift += 7
        if shift > 21:  # a malformed length: the frame runs to the end of what came
            return len(buf)


def _stomp_end(buf: bytes, at: int) -> int | None:
    """The end of the STOMP frame starting at `at` (after any heart-beat EOLs): its NUL. The
    opening frames carry no body, so no content-length to honour."""
    while at < len(buf) and buf[at] in EOLS:
        at += 1
    nul = buf.find(b"\x00", at)
    return None if nul < 0 else nul + 1


def frames_end(buf: bytes, n: int) -> int | None:
    """How many bytes of `buf` the first `n` whole frames take; None while they have not all
    arrived. A stream that is neither MQTT nor STOMP has no frame to pass: 0."""
    if n <= 0 or not buf:
        return 0 if n <= 0 else None
    if buf[0] == MQTT_CONNECT:
        step = _mqtt_end
    elif any(buf.startswith(p) or p.startswith(buf[: len(p)]) for p in STOMP_FIRST):
        step = _stomp_end
    else:
        return 0
    at = 0
    for _ in range(n):
        end = step(buf, at)
        if end is None:
            return None
        at = end
    return at
