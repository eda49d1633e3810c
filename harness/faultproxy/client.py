"""The harness's only client of the Toxiproxy 2.x HTTP API (stdlib urllib, no extra dependencies).

Works against the builtin server (`harness.faultproxy.server`) and a real Toxiproxy 2.x alike:
updates use POST (every 2.x server accepts it; PATCH only exists in later 2.x releases).
Every error answer raises `ToxiproxyError(status, message)`; an unreachable server raises it with
status 0.

The fault helpers at the end are thin wrappers expressed over proxy names ("links").
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote


class ToxiproxyError(Exception):
    """An error answer of the API (`status` is the HTTP code, 0 if the server was unreachable)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message


class ToxiproxyClient:
    def __init__(self, url: str = "http://127.0.0.1:8474", timeout: float = 5.0) -> None:
        if "://" not in url:
            url = "http://" + url
        self.url = url.rstrip("/")
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"ToxiproxyClient({self.url!r})"

    # -- transport
    def _request(self, method: str, path: str, body: Any = None, *, ok: tuple[int, ...] = (200,)) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("User-Agent", "bfh-harness")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                status = resp.status
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            raise ToxiproxyError(exc.code, _error_message(raw, exc.reason)) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ToxiproxyError(0, f"cannot reach Toxiproxy API at {self.url}: {reason}") from None
        if status not in ok and not 200 <= status < 300:
            raise ToxiproxyError(status, _error_message(raw, "unexpected status"))
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace").strip()

    @staticmethod
    def _p(name: str) -> str:
        return "/proxies/" + quote(name, safe="")

    # -- API
    def version(self) -> dict[str, Any] | str:
        """`{"version": ...}` (Toxiproxy >= 2.7 answers JSON; older ones plain text)."""
        out = self._request("GET", "/version")
        return out if isinstance(out, dict | str) else str(out)

    def proxies(self) -> dict[str, dict[str, Any]]:
        return dict(self._request("GET", "/proxies") or {})

    def connection_counts(self) -> dict[str, Any] | None:
        """The built-in proxy's accepted connections per time bucket (`{bucket_s, proxies: {name:
        [[bucket, n], ...]}}`); None from a real Toxiproxy, which keeps no such counts."""
        try:
            out = self._request("GET", "/bfh/connections")
        except ToxiproxyError:
            return None
        return out if isinstance(out, dict) else None

    def get_proxy(self, name: str) -> dict[str, Any]:
        return dict(self._request("GET", self._p(name)))

    def create_proxy(self, name: str, listen: str, upstream: str, enabled: bool = True) -> dict[str, Any]:
        body = {"name": name, "listen": listen, "upstream": upstream, "enabled": enabled}
        return dict(self._request("POST", "/proxies", body, ok=(201,)))

    def populate(self, proxies: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Create or replace proxies; unchanged ones are left alone. Returns the resulting proxies."""
        out = self._request("POST", "/populate", list(proxies), ok=(201,))
        if isinstance(out, dict):
            return list(out.get("proxies", []))
        return list(out or [])

    def update_proxy(self, name: str, **fields: Any) -> dict[str, Any]:
        return dict(self._request("POST", self._p(name), fields))

    def delete_proxy(self, name: str) -> None:
        self._request("DELETE", self._p(name), ok=(204,))

    def enable(self, name: str) -> dict[str, Any]:
        return self.update_proxy(name, enabled=True)

    def disable(self, name: str) -> dict[str, Any]:
        return self.update_proxy(name, enabled=False)

    def toxics(self, proxy: str) -> list[dict[str, Any]]:
        return list(self._request("GET", self._p(proxy) + "/toxics") or [])

    def get_toxic(self, proxy: str, name: str) -> dict[str, Any]:
        return dict(self._request("GET", f"{self._p(proxy)}/toxics/{quote(name, safe='')}"))

    def add_toxic(
        self,
        proxy: str,
        type: str,  # noqa: A002 - Toxiproxy's field name
        *,
        name: str | None = None,
        stream: str = "downstream",
        toxicity: float = 1.0,
        **attributes: Any,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": type,
            "stream": stream,
            "toxicity": toxicity,
            "attributes": attributes,
        }
        if name is not None:
            body["name"] = name
        return dict(self._request("POST", self._p(proxy) + "/toxics", body))

    def update_toxic(self, proxy: str, name: str, **fields: Any) -> dict[str, Any]:
        """Partial update: `toxicity=` and/or `attributes={...}`; other keywords are attributes."""
        body: dict[str, Any] = {}
        attrs = dict(fields.pop("attributes", None) or {})
        if "toxicity" in fields:
            body["toxicity"] = fields.pop("toxicity")
        attrs.update(fields)
        if attrs:
            body["attributes"] = attrs
        return dict(self._request("POST", f"{self._p(proxy)}/toxics/{quote(name, safe='')}", body))

    def remove_toxic(self, proxy: str, name: str) -> None:
        self._request("DELETE", f"{self._p(proxy)}/toxics/{quote(name, safe='')}", ok=(204,))

    def reset(self) -> None:
        """Enable every proxy and remove every toxic."""
        self._request("POST", "/reset", ok=(204,))

    def wait_ready(self, timeout: float = 10) -> dict[str, Any] | str:
        """Poll /version until the server answers; raises ToxiproxyError(0, ...) on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.version()
            except ToxiproxyError as exc:
                if exc.status != 0 or time.monotonic() >= deadline:
                    raise
            time.sleep(0.05)

    # -- fault helpers over links (proxy names)
    def _upsert_toxic(self, proxy: str, type_: str, stream: str, **attributes: Any) -> dict[str, Any]:
        """Add the toxic `<type>_<stream>`, or update it if it is already there."""
        try:
            return self.add_toxic(proxy, type_, stream=stream, **attributes)
        except ToxiproxyError as exc:
            if exc.status != 409:
                raise
            return self.update_toxic(proxy, f"{type_}_{stream}", toxicity=1.0, attributes=attributes)

    def _streams(self, stream: str) -> tuple[str, ...]:
        return ("upstream", "downstream") if stream == "both" else (stream,)

    def down(self, proxy: str) -> dict[str, Any]:
        """Refuse new connections and close existing ones (`enabled: false`)."""
        return self.disable(proxy)

    def up(self, proxy: str) -> dict[str, Any]:
        return self.enable(proxy)

    def black_hole(self, proxy: str) -> list[dict[str, Any]]:
        """Connections stay open but every byte is dropped both ways (timeout toxic 0)."""
        return [self._upsert_toxic(proxy, "timeout", s, timeout=0) for s in ("upstream", "downstream")]

    def partition(self, proxies: Iterable[str]) -> None:
        """Black-hole a set of links."""
        for p in proxies:
            self.black_hole(p)

    def heal(self, proxy: str) -> None:
        """Remove every toxic of the link and enable it."""
        for t in self.toxics(proxy):
            try:
                self.remove_toxic(proxy, t["name"])
            except ToxiproxyError as exc:
                if exc.status != 404:
                    raise
        self.enable(proxy)

    def latency(
        self, proxy: str, ms: int, jitter: int = 0, stream: str = "downstream"
    ) -> list[dict[str, Any]]:
        return [
            self._upsert_toxic(proxy, "latency", s, latency=int(ms), jitter=int(jitter))
            for s in self._streams(stream)
        ]

    def bandwidth(self, proxy: str, kbps: int, stream: str = "downstream") -> list[dict[str, Any]]:
        return [self._upsert_toxic(proxy, "bandwidth", s, rate=int(kbps)) for s in self._streams(stream)]

    def reset_peer(self, proxy: str, timeout_ms: int = 0, stream: str = "downstream") -> list[dict[str, Any]]:
        return [
            self._upsert_toxic(proxy, "reset_peer", s, timeout=int(timeout_ms)) for s in self._streams(stream)
        ]

    def slice(
        self, proxy: str, avg: int, var: int = 0, delay_us: int = 0, stream: str = "downstream"
    ) -> list[dict[str, Any]]:
        return [
            self._upsert_toxic(
                proxy, "slicer", s, average_size=int(avg), size_variation=int(var), delay=int(delay_us)
            )
            for s in self._streams(stream)
        ]

    def limit(
        self, proxy: str, nbytes: int, stream: str = "downstream", hold_ms: int = 0, frames: int = 0
    ) -> list[dict[str, Any]]:
        """`hold_ms` (the builtin server only): hold what follows the limit that long, no close;
        `frames` (the builtin server only): the limit is the first that many whole MQTT or STOMP
        frames, not `nbytes`."""
        attrs = {
            "bytes": int(nbytes),
            **({"hold": int(hold_ms)} if hold_ms else {}),
            **({"frames": int(frames)} if frames else {}),
        }
        return [self._upsert_toxic(proxy, "limit_data", s, **attrs) for s in self._streams(stream)]

    def slow_close(self, proxy: str, delay_ms: int, stream: str = "downstream") -> list[dict[str, Any]]:
        return [
            self._upsert_toxic(proxy, "slow_close", s, delay=int(delay_ms)) for s in self._streams(stream)
        ]


def _error_message(raw: bytes, fallback: Any) -> str:
    try:
        doc = json.loads(raw)
        if isinstance(doc, dict) and "error" in doc:
            return str(doc["error"])
    except ValueError:
        pass
    text = raw.decode("utf-8", "replace").strip()
    return text or str(fallback)
