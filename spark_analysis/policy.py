"""The verdict policy: which anomalies fail a run, and by how much.

A policy is an input of the job: a JSON or YAML file (``--policy FILE``) and/or command-line
overrides (``--settle-s``, ``--max-duplicates``). Unknown keys are rejected, so a typo cannot
silently weaken a verdict.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class PolicyError(ValueError):
    """A policy file or value that cannot be used."""


@dataclass(frozen=True)
class Policy:
    #: lost (acknowledged, at-least-once, never received) pairs tolerated
    max_lost: int = 0
    #: distinct received msg_ids that no publisher ever attempted
    max_unexpected: int = 0
    #: ghosts of messages the publisher dropped for one of ``ghost_timeout_reasons``
    max_ghost_timeout: int = 0
    #: drop reasons whose ghosts count as ghost-through-timeout
    ghost_timeout_reasons: tuple[str, ...] = ("publisher_timeout",)
    #: ghosts of messages dropped for any other reason
    max_ghost_dropped_other: int | None = 0
    #: ghosts of in-doubt messages (never acknowledged, never dropped: the publisher died after
    #: the broker took the message). ``None`` = reported, never a violation.
    max_ghost_in_doubt: int | None = None
    #: duplicated pairs tolerated; ``None`` = duplicates are reported, never a violation
    max_duplicates: int | None = None
    #: received on a subscription whose filter does not match the message's topic
    max_misrouted: int = 0
    #: (agent, topic) pairs published or subscribed with a weaker guarantee (QoS, durability)
    #: than the workload in run.json asked for; ``None`` = reported, never a violation
    max_downgrades: int | None = 0
    #: malformed records tolerated; ``None`` = reported, never a violation (a torn last line
    #: after a kill -9 is normal)
    max_malformed: int | None = None
    #: seconds after a fault's end still attributed to that fault
    settle_s: float = 10.0
    #: fail when a fault window saw no acknowledged send or no receipt
    fail_on_vacuous: bool = False
    #: example msg_ids kept per reason / per fault anomaly
    examples: int = 5

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["ghost_timeout_reasons"] = list(self.ghost_timeout_reasons)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Policy:
        if not isinstance(data, dict):
            raise PolicyError("policy must be a mapping of keys to values")
        names = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise PolicyError(
                f"unknown policy key(s): {', '.join(unknown)} (known: {', '.join(sorted(names))})"
            )
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            kwargs[key] = _coerce(key, value, getattr(cls(), key))
        return cls(**kwargs)

    def with_overrides(self, **overrides: Any) -> Policy:
        data = self.to_dict()
        data.update({k: v for k, v in overrides.items() if v is not None})
        return Policy.from_dict(data)


_OPTIONAL_INTS = {
    "max_ghost_dropped_other",
    "max_ghost_in_doubt",
    "max_duplicates",
    "max_malformed",
    "max_downgrades",
}


def _coerce(key: str, value: Any, default: Any) -> Any:
    if key == "ghost_timeout_reasons":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise PolicyError(f"policy {key} must be a list of strings")
        return tuple(value)
    if key in _OPTIONAL_INTS and value is None:
        return None
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise PolicyError(f"policy {key} must be true or false, got {value!r}")
        return value
    if isinstance(default, int) or key in _OPTIONAL_INTS:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise PolicyError(f"policy {key} must be a non-negative integer, got {value!r}")
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise PolicyError(f"policy {key} must be a non-negative number, got {value!r}")
        return float(value)
    return value


def load_policy(path: str | Path | None = None, **overrides: Any) -> Policy:
    """Load a policy file (JSON, or YAML by extension) and apply non-None overrides."""
    policy = Policy()
    if path is not None:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise PolicyError(f"cannot read policy file {p}: {exc.strerror or exc}") from None
        try:
            if p.suffix.lower() in {".yaml", ".yml"}:
                import yaml

                data = yaml.safe_load(text) or {}
            else:
                data = json.loads(text) if text.strip() else {}
        except Exception as exc:  # any parse error is a bad input
            raise PolicyError(f"cannot parse policy file {p}: {exc}") from None
        policy = Policy.from_dict(data)
    return policy.with_overrides(**overrides)
