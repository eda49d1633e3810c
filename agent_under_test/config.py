"""agent.conf and workload.json for the agents (docs/contracts.md, docs/agent-semantics.md).

Both files are validated up front; anything malformed raises `ConfigError` whose message is one line
naming the file, the key and what is wrong. Agents print it to stderr and exit with status 2.
Secrets (`mb.password`) are never part of an error message.
"""

from __future__ import annotations

import configparser
import json
import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

EXIT_CONFIG = 2


class ConfigError(ValueError):
    """A malformed agent.conf or workload.json; the message is a single line."""


# ---------------------------------------------------------------------------------------------
# agent.conf
# ---------------------------------------------------------------------------------------------

_HOST_RE = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]+\])$")


class BrokerUrl(BaseModel):
    """One entry of `mb.urls`: `host:port` or `ssl://host:port`."""

    model_config = ConfigDict(frozen=True)

    host: str
    port: int
    tls: bool = False

    @property
    def key(self) -> str:
        """The `host:port` used as `broker` in the message log."""
        return f"{self.host}:{self.port}"

    @property
    def connect_host(self) -> str:
        return self.host[1:-1] if self.host.startswith("[") else self.host

    @classmethod
    def parse(cls, text: str) -> BrokerUrl:
        raw = text.strip()
        tls = False
        lowered = raw.lower()
        if lowered.startswith("ssl://"):
            tls, raw = True, raw[6:]
        elif lowered.startswith("tcp://"):
            raw = raw[6:]
        elif "://" in raw:
            raise ValueError(f"{text.strip()!r}: unsupported scheme (use host:port or ssl://host:port)")
        host, sep, port_s = raw.rpartition(":")
        if not sep or not host or not port_s:
            raise ValueError(f"{text.strip()!r} is not host:port")
        if not _HOST_RE.match(host):
            raise ValueError(f"{text.strip()!r}: bad host {host!r}")
        if not port_s.isdigit() or not 1 <= int(port_s) <= 65535:
            raise ValueError(f"{text.strip()!r}: port must be an integer 1-65535")
        return cls(host=host, port=int(port_s), tls=tls)


# key in agent.conf -> (field name, kind). Kinds: "int" (whole seconds), "float" (seconds), "str".
OPTIONAL_KEYS: dict[str, tuple[str, str]] = {
    "mb.connect.timeout": ("connect_timeout", "float"),
    "mb.keepalive": ("keepalive", "int"),
    "mb.liveness.interval": ("liveness_interval", "float"),
    "mb.liveness.timeout": ("liveness_timeout", "float"),
    "mb.backoff.initial": ("backoff_initial", "float"),
    "mb.backoff.cap": ("backoff_cap", "float"),
    "mb.client.id.prefix": ("client_id_prefix", "str"),
    "mb.ssl.ca": ("ssl_ca", "str"),
    "mb.subscribe.wait": ("subscribe_wait", "float"),
    "mb.publisher.inflight": ("publisher_inflight", "int"),
}
REQUIRED_KEYS = ("mb.urls",)
PCA_KEYS = ("mb.urls", "mb.username", "mb.password", "mb.publisher.timeout")


class AgentConf(BaseModel):
    """Validated `[agent]` section. Timings are seconds."""

    model_config = ConfigDict(frozen=True)

    urls: list[BrokerUrl] = Field(min_length=1)
    username: str = ""
    password: SecretStr = SecretStr("")
    publisher_timeout: int = Field(default=900, ge=0)
    connect_timeout: float = Field(default=2.0, gt=0, le=300)
    keepalive: int = Field(default=2, ge=1, le=65535)
    liveness_interval: float = Field(default=0.5, gt=0, le=60)
    liveness_timeout: float | None = Field(default=None, gt=0, le=3600)
    backoff_initial: float = Field(default=0.1, gt=0, le=60)
    backoff_cap: float = Field(default=1.0, gt=0, le=600)
    client_id_prefix: str = Field(default="bfh", pattern=r"^[A-Za-z0-9_-]{0,32}$")
    ssl_ca: str | None = None
    subscribe_wait: float = Field(default=30.0, ge=0, le=3600)
    publisher_inflight: int = Field(default=64, ge=1, le=65535)

    @property
    def effective_liveness_timeout(self) -> float:
        """Silence (no byte from the broker) after which a link is declared dead.

        A healthy idle link hears from the broker at least every `keepalive` seconds (MQTT PINGRESP,
        STOMP heart-beat), so 1.5 x keepalive + 0.5 s leaves room for scheduling jitter.
        """
        if self.liveness_timeout is not None:
            return self.liveness_timeout
        return 1.5 * self.keepalive + 0.5

    def redacted(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["password"] = "***" if self.password.get_secret_value() else ""
        return data


def _num(key: str, text: str, kind: str) -> float | int:
    t = text.strip()
    if kind == "int":
        if not re.fullmatch(r"[+-]?\d+", t):
            raise ConfigError(f"{key} = {t!r}: must be a whole number of seconds")
        return int(t)
    try:
        value = float(t)
    except ValueError:
        raise ConfigError(f"{key} = {t!r}: must be a number of seconds") from None
    if not math.isfinite(value):
        raise ConfigError(f"{key} = {t!r}: must be a finite number of seconds")
    return value


def parse_agent_conf(text: str, source: str = "agent.conf") -> AgentConf:
    """Parse the INI text of an agent.conf. Raises ConfigError (one line) when malformed."""
    try:
        return _parse_agent_conf(text)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None


def _agent_section(text: str) -> dict[str, str]:
    """The [agent] section's keys (lower case), with the required ones present and no unknown mb.*."""
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    try:
        parser.read_string(text)
    except configparser.Error as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConfigError(f"not a valid INI file ({first})") from None
    if not parser.has_section("agent"):
        raise ConfigError("missing [agent] section")
    sec = {k.strip().lower(): v for k, v in parser.items("agent")}
    for key in REQUIRED_KEYS:
        if key not in sec or not sec[key].strip():
            raise ConfigError(f"{key} is required (comma-separated host:port list)")
    known = set(PCA_KEYS) | set(OPTIONAL_KEYS)
    for key in sec:
        # Other PCA keys (cep.*, log.*, ...) are none of our business; a misspelt mb.* key is.
        if key.startswith("mb.") and key not in known:
            raise ConfigError(f"unknown key {key} (known mb.* keys: {', '.join(sorted(known))})")
    return sec


def _broker_urls(raw: str) -> list[BrokerUrl]:
    entries = raw.split(",")
    if any(not entry.strip() for entry in entries):
        raise ConfigError("mb.urls: empty entry in the list")
    urls = []
    for entry in entries:
        try:
            urls.append(BrokerUrl.parse(entry))
        except ValueError as err:
            raise ConfigError(f"mb.urls: {err}") from None
    return urls


def _parse_agent_conf(text: str) -> AgentConf:
    sec = _agent_section(text)
    values: dict[str, Any] = {"urls": _broker_urls(sec["mb.urls"])}
    if "mb.username" in sec:
        values["username"] = sec["mb.username"].strip()
    if "mb.password" in sec:
        values["password"] = SecretStr(sec["mb.password"].strip())
    if sec.get("mb.publisher.timeout", "").strip():
        values["publisher_timeout"] = _num("mb.publisher.timeout", sec["mb.publisher.timeout"], "int")
    for key, (field, kind) in OPTIONAL_KEYS.items():
        raw = sec.get(key, "").strip()
        if not raw:
            continue
        values[field] = raw if kind == "str" else _num(key, raw, kind)
    if values.get("ssl_ca"):
        ca = Path(values["ssl_ca"])
        if not ca.is_file():
            raise ConfigError(f"mb.ssl.ca = {str(ca)!r}: no such file")
    try:
        return AgentConf(**values)
    except ValidationError as err:
        detail = err.errors()[0]
        name = str(detail["loc"][0]) if detail["loc"] else "?"
        raise ConfigError(f"{_field_to_key(name)}: {detail['msg']}") from None


def _field_to_key(field: str) -> str:
    for key, (f, _kind) in OPTIONAL_KEYS.items():
        if f == field:
            return key
    return {"publisher_timeout": "mb.publisher.timeout", "urls": "mb.urls"}.get(field, field)


def load_agent_conf(path: str | Path) -> AgentConf:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: cannot read ({getattr(e, 'strerror', None) or e})") from None
    return parse_agent_conf(text, str(p))


# ---------------------------------------------------------------------------------------------
# workload.json
# ---------------------------------------------------------------------------------------------

_Qos = Literal[0, 1, 2]
_NonEmpty = Annotated[str, Field(min_length=1, max_length=200)]


class _Model(BaseModel):
    # Contracts grow by optional fields; readers ignore what they do not know.
    model_config = ConfigDict(frozen=True, extra="ignore", strict=False)


def _check_topic(topic: str, allow_wildcards: bool) -> str:
    if not topic or len(topic) > 1000:
        raise ValueError("topic must be 1-1000 characters")
    if "\x00" in topic:
        raise ValueError("topic must not contain NUL")
    levels = topic.split("/")
    for i, level in enumerate(levels):
        if ("+" in level and level != "+") or ("#" in level and level != "#"):
            raise ValueError(f"{topic!r}: a wildcard must be a whole level")
        if level in ("+", "#") and not allow_wildcards:
            raise ValueError(f"{topic!r}: wildcards are not allowed in a publication topic")
        if level == "#" and i != len(levels) - 1:
            raise ValueError(f"{topic!r}: '#' must be the last level")
    return topic


class Subscription(_Model):
    topic: _NonEmpty
    qos: _Qos = 1
    durable: bool = True

    @field_validator("topic")
    @classmethod
    def _topic(cls, v: str) -> str:
        return _check_topic(v, allow_wildcards=True)


class Publication(_Model):
    topic: _NonEmpty
    qos: _Qos = 1
    count: int = Field(ge=0, le=100_000_000)
    rate_per_s: float = Field(gt=0, le=1_000_000)
    payload_bytes: int = Field(default=256, ge=0, le=16 * 1024 * 1024)

    @field_validator("topic")
    @classmethod
    def _topic(cls, v: str) -> str:
        return _check_topic(v, allow_wildcards=False)


class Workload(_Model):
    run: Annotated[str, Field(min_length=1, max_length=200)]
    agent: Annotated[str, Field(min_length=1, max_length=200)]
    protocol: Literal["mqtt", "stomp"]
    subscriptions: list[Subscription] = Field(default_factory=list)
    publications: list[Publication] = Field(default_factory=list)

    @field_validator("subscriptions")
    @classmethod
    def _unique(cls, v: list[Subscription]) -> list[Subscription]:
        seen: set[str] = set()
        for s in v:
            if s.topic in seen:
                raise ValueError(f"subscription topic {s.topic!r} appears twice")
            seen.add(s.topic)
        return v


def parse_workload(data: Any, source: str = "workload.json") -> Workload:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: must be a JSON object with run, agent, protocol, ...")
    try:
        return Workload.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] == "literal_error":
            msg = f"{msg}, got {first.get('input')!r}"
        raise ConfigError(f"{source}: {loc}: {msg}") from None


def load_workload(path: str | Path) -> Workload:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: cannot read ({getattr(e, 'strerror', None) or e})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{p}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    return parse_workload(data, str(p))


# ---------------------------------------------------------------------------------------------
# Topic names
# ---------------------------------------------------------------------------------------------


def stomp_destination(topic: str) -> str:
    """MQTT-style topic or filter -> ActiveMQ STOMP destination: a/b/+/# -> /topic/a.b.*.>"""
    parts = ["*" if p == "+" else ">" if p == "#" else p for p in topic.split("/")]
    return "/topic/" + ".".join(parts)


def mqtt_topic(destination: str) -> str:
    """ActiveMQ STOMP destination -> MQTT-style topic: /topic/a.b.c -> a/b/c"""
    name = destination.removeprefix("/topic/")
    return "/".join("+" if p == "*" else "#" if p == ">" else p for p in name.split("."))


def client_id(prefix: str, run: str, agent: str, role: str) -> str:
    """A client id unique per (run, agent, role) and stable across reconnects.

    role: `s<index>` for the subscription at that index of the workload, `pub` for the publisher.
    """
    raw = "-".join(p for p in (prefix, run, agent, role) if p)
    return re.sub(r"[^A-Za-z0-9_-]", "_", raw)
