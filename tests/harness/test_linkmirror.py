"""The link mirror with a fake proxy: links to upstreams nobody listens on are disabled, re-enabled
when the broker listens, left alone while a fault holds them, and owned again after release. The
release case is the race seen in CI: a heal's reset enabled every link, a concurrent pass disabled
the slave's links again, then the release must not forget them (they stayed off after takeover)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from harness.backends.linkmirror import LinkMirror
from harness.deploy.plan import Plan


class FakeProxy:
    def __init__(self, names: list[str]) -> None:
        self.enabled = dict.fromkeys(names, True)

    def proxies(self) -> dict[str, dict[str, Any]]:
        return {n: {"enabled": e} for n, e in self.enabled.items()}

    def enable(self, name: str) -> None:
        self.enabled[name] = True

    def disable(self, name: str) -> None:
        self.enabled[name] = False

    def reset(self) -> None:
        self.enabled = dict.fromkeys(self.enabled, True)


def _mirror(listening: set[int]) -> tuple[LinkMirror, FakeProxy]:
    links = [SimpleNamespace(name="a", upstream_port=1), SimpleNamespace(name="b", upstream_port=2)]
    proxy = FakeProxy(["a", "b"])
    plan = cast(Plan, SimpleNamespace(links=links))
    return LinkMirror(plan, proxy, lambda: set(listening)), proxy


def test_follows_listening_ports() -> None:
    ports = {1}
    m, proxy = _mirror(ports)
    m.listening = lambda: set(ports)
    m.sync(force=True)
    assert proxy.enabled == {"a": True, "b": False}
    ports.clear()
    ports.add(2)
    m.sync(force=True)
    assert proxy.enabled == {"a": False, "b": True}


def test_held_link_is_left_alone_until_released() -> None:
    ports = {1, 2}
    m, proxy = _mirror(ports)
    m.listening = lambda: set(ports)
    m.hold(["a"])
    proxy.disable("a")  # the fault's own disable
    m.sync(force=True)
    assert proxy.enabled["a"] is False
    proxy.reset()  # the heal
    m.release(["a"])
    assert proxy.enabled == {"a": True, "b": True}


def test_release_after_a_concurrent_disable_still_reenables_on_takeover() -> None:
    ports = {1}  # "a" serves, "b" is a slave
    m, proxy = _mirror(ports)
    m.listening = lambda: set(ports)
    m.sync(force=True)
    proxy.reset()  # heal_all's reset enables every link ...
    m.sync(force=True)  # ... and the mirror's thread disables the slave's again
    assert proxy.enabled["b"] is False
    m.release(["a", "b"])  # heal_all releases every link
    ports.clear()
    ports.add(2)  # takeover: "b" listens now
    m.sync(force=True)
    assert proxy.enabled == {"a": False, "b": True}
