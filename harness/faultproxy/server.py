"""`bfh fault-proxy` / `python -m harness.faultproxy`: a Toxiproxy-2.x-compatible server.

Flags as Toxiproxy's server has them (`-host`, `-port`, `-config`, `-seed`), also with two dashes.
Prints `fault-proxy listening on http://H:P` once the API answers; SIGTERM/SIGINT close every
listener and connection and exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import signal
import stat
import sys

from harness.faultproxy.api import TOXIPROXY_VERSION, ApiServer
from harness.faultproxy.registry import Registry
from harness.faultproxy.toxics import ApiError

log = logging.getLogger("faultproxy")
MAX_CONFIG = 4 << 20  # bytes: the API's own request limit


def _port(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"port {n} is outside 0..65535")
    return n


def _read_config(path: str) -> bytes:
    """A regular file of at most MAX_CONFIG bytes (a FIFO is not waited on, /dev/zero not read)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        data = os.read(fd, MAX_CONFIG + 1)
        while len(data) <= MAX_CONFIG and (more := os.read(fd, MAX_CONFIG + 1 - len(data))):
            data += more
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG:
        raise ValueError(f"larger than {MAX_CONFIG >> 20} MB")
    return data


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bfh fault-proxy",
        description="Toxiproxy 2.x compatible fault proxy (HTTP API + TCP relays).",
        allow_abbrev=False,
    )
    p.add_argument("--host", "-host", default="127.0.0.1", help="API host (default 127.0.0.1)")
    p.add_argument("--port", "-port", type=_port, default=8474, help="API port (default 8474; 0 = any)")
    p.add_argument("--seed", "-seed", type=int, default=None, help="seed for toxicity rolls and jitter")
    p.add_argument("--config", "-config", default=None, help="JSON array of proxies to create at start")
    p.add_argument(
        "--loop",
        choices=("auto", "asyncio", "uvloop"),
        default=os.environ.get("BFH_FAULTPROXY_LOOP", "auto"),
        help="event loop: auto (default) = uvloop if installed (the optional 'fast' extra), else asyncio",
    )
    p.add_argument("--version", "-version", action="version", version=f"fault-proxy {TOXIPROXY_VERSION}")
    return p


def _new_loop(kind: str) -> asyncio.AbstractEventLoop:
    if kind in ("auto", "uvloop"):
        try:
            import uvloop  # type: ignore[import-not-found,unused-ignore]

            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
            return loop
        except ImportError:
            if kind == "uvloop":
                raise SystemExit("fault-proxy: --loop uvloop but uvloop is not installed") from None
    return asyncio.new_event_loop()


async def _serve(args: argparse.Namespace, seed: int) -> int:
    loop = asyncio.get_running_loop()
    registry = Registry(loop, seed)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    api = ApiServer(registry)
    try:
        if args.config:
            try:
                body = json.loads(_read_config(args.config))
            except (OSError, ValueError, RecursionError) as exc:
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                print(f"fault-proxy: cannot read config {args.config}: {why}", file=sys.stderr)
                return 2
            proxies, error = await registry.populate(body)
            if error is not None:
                raise error
            log.info("loaded %d proxies from %s", len(proxies), args.config)
        try:
            host, port = await api.start(args.host, args.port)
        except OSError as exc:
            print(f"fault-proxy: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
            return 2
        shown = f"[{host}]" if ":" in host else host
        print(f"fault-proxy listening on http://{shown}:{port}", flush=True)
        log.info("seed %d, loop %s", seed, type(loop).__module__)
        await stop.wait()
        log.info("stopping")
        return 0
    except ApiError as exc:
        print(f"fault-proxy: config {args.config}: {exc.message}", file=sys.stderr)
        return 2
    finally:
        api.close()
        registry.shutdown()
        await asyncio.sleep(0)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    level = os.environ.get("LOG_LEVEL", "info").upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO),
        stream=sys.stdout,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**63)
    loop = _new_loop(args.loop)
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(_serve(args, seed))
    finally:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
        asyncio.set_event_loop(None)
        sys.stdout.flush()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
