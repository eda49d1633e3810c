"""The fault proxy's proxies (named listeners, each relaying to one upstream, with its toxics) and
the registry of one server's proxies, which the HTTP API (harness.faultproxy.api) drives.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import Counter
from typing import Any

from harness.faultproxy.addresses import join_hostport, same_endpoint, split_hostport
from harness.faultproxy.relay import Connection, _Side
from harness.faultproxy.toxics import ApiError, Toxic

log = logging.getLogger("faultproxy")

ACCEPT_BUCKET_S = 0.1
#: pending connections a listener queues (the kernel caps it at net.core.somaxconn): a fleet of
#: 1,000 connects 2,000 clients at once; past the queue, SYNs are dropped and connects time out
LISTEN_BACKLOG = 4096


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
            sock.listen(LISTEN_BACKLOG)
        except OSError as exc:
            sock.close()
            raise ApiError(409, f"listen tcp {self.listen}: {exc.strerror or exc}") from None
        sock.setblocking(False)
        # create_server listens again with its own backlog (100 unless given): pass ours
        self.server = await self.loop.create_server(self._new_connection, sock=sock, backlog=LISTEN_BACKLOG)
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
