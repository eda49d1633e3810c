"""Fault targets, resolved in one place: roles to brokers (when the fault is applied) and names to
the proxied links they stand for.

A target names a broker, a link, a group (all links of its members), `bridges`, one bridge's links
(`bridge:<from>-><to>`), or a role resolved against the backend now: `master:<group>`,
`slave:<group>` (one live slave), `members:<group>` (every member).
"""

from __future__ import annotations

from harness.backends.base import Backend
from harness.deploy.plan import Link, Plan


class Targets:
    def __init__(self, plan: Plan, backend: Backend) -> None:
        self.plan = plan
        self.backend = backend

    def resolve(self, target: str) -> list[str]:
        """A role to the brokers it names now; any other target as it is."""
        role, _, group = target.partition(":")
        if role == "bridge" or not group:  # bridge:SRC->DST names links, resolved by `links`
            return [target]
        members = [b.name for b in self.plan.members(group)]
        if not members:
            raise ValueError(f"unknown group {group!r} in target {target!r}")
        if role == "members":
            return members
        master = self.backend.master(group)
        if role == "master":
            if master is None:
                raise ValueError(f"group {group} has no master to target")
            return [master]
        if role == "slave":
            slaves = [m for m in members if m != master and self.backend.alive(m)]
            if not slaves:
                raise ValueError(f"group {group} has no live slave to target")
            return slaves[:1]
        raise ValueError(f"unknown role {role!r} in target {target!r}; use master/slave/members")

    def resolve_all(self, targets: list[str]) -> list[str]:
        return [name for t in targets for name in self.resolve(t)]

    def links(self, target: str) -> list[Link]:
        """Resolve a target name to proxied links."""
        plan = self.plan
        if target == "bridges":
            return [lk for lk in plan.links if lk.kind == "bridge"]
        if target.startswith("bridge:"):  # bridge:SRC->DST, the links of one group's bridge to another
            src, _, dst = target.removeprefix("bridge:").partition("->")
            found = plan.bridge_links(src, dst)
            if not found:
                raise ValueError(f"no bridge from group {src!r} to group {dst!r} in target {target!r}")
            return found
        if target in plan.brokers:
            return plan.links_of(target)
        if target in {g.name for g in plan.topology.groups}:
            names = {b.name for b in plan.members(target)}
            return [lk for lk in plan.links if lk.broker in names or lk.source in names]
        found = [lk for lk in plan.links if lk.name == target]
        if not found:
            raise ValueError(f"unknown fault target {target!r}: not a broker, group, link or 'bridges'")
        return found

    def group_of(self, broker: str) -> str:
        return self.plan.brokers[broker].group
