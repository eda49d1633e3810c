"""The Toxiproxy 2.x HTTP API over a small stdlib asyncio HTTP/1.1 server.

Routes (all JSON):
  GET /version | POST /reset | POST /populate
  GET, POST /proxies
  GET, POST, PATCH, DELETE /proxies/{proxy}               (POST = update, as toxiproxy-python uses)
  GET, POST /proxies/{proxy}/toxics
  GET, POST, PATCH, DELETE /proxies/{proxy}/toxics/{toxic}
Errors are `{"error": message, "status": code}`. Browser user agents get 403, as in Toxiproxy.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any
from urllib.parse import unquote, urlsplit

from harness.faultproxy.registry import ACCEPT_BUCKET_S, Registry
from harness.faultproxy.toxics import ApiError, Toxic

log = logging.getLogger("faultproxy.api")

TOXIPROXY_VERSION = "2.12.0"
MAX_BODY = 4 << 20

_REASONS = {
    200: "OK",
    201: "Created",
    204: "No Content",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    411: "Length Required",
    413: "Payload Too Large",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
}

Response = tuple[int, Any]  # (status, JSON-able body or None for no body)


class _BadHttp(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class ApiServer:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.server: asyncio.base_events.Server | None = None
        self._clients: set[asyncio.StreamWriter] = set()
        self._lock = asyncio.Lock()  # one change at a time: creates and updates await binds

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self.server = await asyncio.start_server(self._handle, host or None, port, limit=64 * 1024)
        sockname = self.server.sockets[0].getsockname()
        return str(sockname[0]), int(sockname[1])

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        for w in list(self._clients):
            w.close()

    # -- HTTP plumbing
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._clients.add(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                except asyncio.LimitOverrunError:
                    await self._send(writer, 431, _err(431, "request header too large"), close=True)
                    return
                try:
                    method, target, version, headers = _parse_head(head)
                    if headers.get("expect", "").lower() == "100-continue":  # curl, for bodies > 1 KB
                        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                    body = await _read_body(reader, headers)
                except _BadHttp as exc:
                    await self._send(writer, exc.status, _err(exc.status, exc.message), close=True)
                    return
                keep = _keep_alive(version, headers)
                status, payload = await self.dispatch(method, target, headers, body)
                await self._send(writer, status, payload, close=not keep, head_only=method == "HEAD")
                if not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._clients.discard(writer)
            writer.close()

    async def _send(
        self, writer: asyncio.StreamWriter, status: int, payload: Any, *, close: bool, head_only: bool = False
    ) -> None:
        if isinstance(payload, _Text):
            body = payload.text.encode()
            ctype = "text/plain; charset=utf-8"
        elif payload is None:
            body = b""
            ctype = ""
        else:
            body = json.dumps(payload).encode() + b"\n"
            ctype = "application/json"
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
        if ctype:
            lines.append(f"Content-Type: {ctype}")
        if status != 204:
            lines.append(f"Content-Length: {len(body)}")
        if close:
            lines.append("Connection: close")
        data = ("\r\n".join(lines) + "\r\n\r\n").encode()
        if status != 204 and not head_only:
            data += body
        writer.write(data)
        await writer.drain()

    # -- routing
    async def dispatch(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Response:
        if headers.get("user-agent", "").startswith("Mozilla/"):
            return 403, _Text("User agent not allowed\n")
        try:  # origin form is a path ("//[" is no authority); absolute form a URL
            path = target.partition("?")[0] if target.startswith("/") else urlsplit(target).path
        except ValueError:
            return 400, _err(400, f"bad request target {target[:100]!r}")
        parts = [unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []
        try:
            if method in ("GET", "HEAD"):
                return await self._route(method, parts, body)
            async with self._lock:
                return await self._route(method, parts, body)
        except ApiError as exc:
            return exc.status, _err(exc.status, exc.message)
        except Exception as exc:  # never let one request take the server down
            log.exception("internal error on %s %s", method, target)
            return 500, _err(500, f"internal error: {exc}")

    async def _route(self, method: str, parts: list[str], raw: bytes) -> Response:
        reg = self.registry
        if method == "HEAD":
            method = "GET"
        n = len(parts)
        if parts == ["version"]:
            _allow(method, "GET")
            return 200, {"version": TOXIPROXY_VERSION, "server": "bfh-fault-proxy"}
        if parts == ["reset"]:
            _allow(method, "POST")
            await reg.reset()
            return 204, None
        if parts == ["populate"]:
            _allow(method, "POST")
            proxies, error = await reg.populate(_json(raw))
            listing = [p.to_json() for p in proxies]
            if error is not None:
                return error.status, {**_err(error.status, error.message), "proxies": listing}
            return 201, {"proxies": listing}
        if parts == ["bfh", "connections"]:  # not Toxiproxy's: accepted connections over time
            _allow(method, "GET")
            return 200, {
                "bucket_s": ACCEPT_BUCKET_S,
                "proxies": {n: sorted(p.accepts.items()) for n, p in reg.proxies.items()},
            }
        if n == 0 or parts[0] != "proxies":
            raise ApiError(404, "not found")
        return await self._route_proxies(method, parts, raw)

    async def _route_proxies(self, method: str, parts: list[str], raw: bytes) -> Response:
        """/proxies, /proxies/NAME and below."""
        reg = self.registry
        n = len(parts)
        if n == 1:
            _allow(method, "GET", "POST")
            if method == "GET":
                return 200, {name: p.to_json() for name, p in reg.proxies.items()}
            proxy = await reg.create(_json(raw))
            return 201, proxy.to_json()
        name = parts[1]
        if n == 2:
            _allow(method, "GET", "POST", "PATCH", "DELETE")
            if method == "GET":
                return 200, reg.get(name).to_json()
            if method == "DELETE":
                reg.delete(name)
                return 204, None
            return 200, (await reg.update(name, _json(raw))).to_json()
        if parts[2] != "toxics" or n > 4:
            raise ApiError(404, "not found")
        proxy = reg.get(name)
        if n == 3:
            _allow(method, "GET", "POST")
            if method == "GET":
                return 200, [t.to_json() for t in proxy.toxics.values()]
            toxic = Toxic.from_json(_json(raw))
            proxy.add_toxic(toxic)
            return 200, toxic.to_json()
        tname = parts[3]
        _allow(method, "GET", "POST", "PATCH", "DELETE")
        if method == "GET":
            return 200, proxy.get_toxic(tname).to_json()
        if method == "DELETE":
            proxy.remove_toxic(tname)
            return 204, None
        return 200, proxy.update_toxic(tname, _json(raw)).to_json()


class _Text:
    def __init__(self, text: str) -> None:
        self.text = text


def _err(status: int, message: str) -> dict[str, Any]:
    return {"error": message, "status": status}


def _allow(method: str, *allowed: str) -> None:
    if method not in allowed:
        raise ApiError(405, f"method {method} not allowed here (allowed: {', '.join(allowed)})")


def _json(raw: bytes) -> Any:
    if not raw.strip():
        raise ApiError(400, "bad request body: empty")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"bad request body: {exc}") from None
    except RecursionError:
        raise ApiError(400, "bad request body: nested too deeply") from None


def _parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes everything
        raise _BadHttp(400, "bad request") from None
    lines = text.split("\r\n")
    request = lines[0].split(" ")
    if len(request) != 3 or not request[2].startswith("HTTP/1."):
        raise _BadHttp(400, "malformed request line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        key, sep, value = line.partition(":")
        if not sep or not key.strip():
            raise _BadHttp(400, "malformed header line")
        headers[key.strip().lower()] = value.strip()
    return request[0].upper(), request[1], request[2], headers


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks: list[bytes] = []
        total = 0
        while True:
            line = await reader.readuntil(b"\r\n")
            try:
                size = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                raise _BadHttp(400, "malformed chunk size") from None
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                return b"".join(chunks)
            total += size
            if total > MAX_BODY:
                raise _BadHttp(413, "request body too large")
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
    length = headers.get("content-length")
    if length is None:
        return b""
    try:
        n = int(length)
    except ValueError:
        raise _BadHttp(400, "malformed Content-Length") from None
    if n < 0:
        raise _BadHttp(400, "malformed Content-Length")
    if n > MAX_BODY:
        raise _BadHttp(413, "request body too large")
    return await reader.readexactly(n)


def _keep_alive(version: str, headers: dict[str, str]) -> bool:
    conn = headers.get("connection", "").lower()
    if version == "HTTP/1.0":
        return conn == "keep-alive"
    return conn != "close"
