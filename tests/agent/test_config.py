"""agent.conf / workload.json validation and the command line (no brokers needed)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_under_test.config import (
    ConfigError,
    client_id,
    mqtt_topic,
    parse_agent_conf,
    parse_workload,
    stomp_destination,
)
from agent_under_test.defects import DEFECTS, command

GOOD_CONF = (
    "[agent]\nmb.urls = 127.0.0.1:1883, ssl://broker.example:8883\nmb.username = u\nmb.password = hunter2\n"
)
GOOD_WL = {
    "run": "r1",
    "agent": "a1",
    "protocol": "mqtt",
    "subscriptions": [{"topic": "topology/#", "qos": 1, "durable": True}],
    "publications": [
        {"topic": "instance/status/X", "qos": 1, "count": 3, "rate_per_s": 10.0, "payload_bytes": 64}
    ],
}


def test_good_conf_defaults_and_optional_keys() -> None:
    c = parse_agent_conf(GOOD_CONF)
    assert [u.key for u in c.urls] == ["127.0.0.1:1883", "broker.example:8883"]
    assert [u.tls for u in c.urls] == [False, True]
    assert c.publisher_timeout == 900 and c.connect_timeout == 2.0 and c.keepalive == 2
    assert c.effective_liveness_timeout <= 5.0
    c2 = parse_agent_conf(
        GOOD_CONF + "mb.connect.timeout = 0.5\nmb.backoff.cap = 3\nmb.client.id.prefix = x\n"
    )
    assert (c2.connect_timeout, c2.backoff_cap, c2.client_id_prefix) == (0.5, 3.0, "x")
    assert "hunter2" not in json.dumps(c.redacted())
    # other PCA keys are ignored, unknown mb.* keys are not
    assert parse_agent_conf(GOOD_CONF + "cep.stats.publisher.enabled = true\n").urls


@pytest.mark.parametrize(
    ("extra_or_text", "needle"),
    [
        ("[agent]\nmb.urls =\n", "mb.urls"),
        ("[agent]\nmb.urls = 127.0.0.1:1883,,127.0.0.1:1884\n", "empty entry"),
        ("[agent]\nmb.urls = localhost\n", "host:port"),
        ("[agent]\nmb.urls = localhost:99999\n", "port"),
        ("[agent]\nmb.urls = amqp://h:1\n", "scheme"),
        ("[agent]\nmb.urls = h:1\nmb.publisher.timeout = 1.5\n", "mb.publisher.timeout"),
        ("[agent]\nmb.urls = h:1\nmb.publisher.timeout = soon\n", "mb.publisher.timeout"),
        ("[agent]\nmb.urls = h:1\nmb.connect.timeout = -1\n", "mb.connect.timeout"),
        ("[agent]\nmb.urls = h:1\nmb.conect.timeout = 1\n", "unknown key mb.conect.timeout"),
        ("[agent]\nmb.urls = h:1\nmb.ssl.ca = /nonexistent/ca.pem\n", "mb.ssl.ca"),
        ("mb.urls = h:1\n", "INI"),
        ("[other]\nx = 1\n", "[agent]"),
    ],
)
def test_malformed_conf_is_one_clear_line(extra_or_text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_agent_conf(
            extra_or_text + "mb.password = hunter2\n" if "[agent]" in extra_or_text else extra_or_text
        )
    msg = str(e.value)
    assert needle in msg and "\n" not in msg and "hunter2" not in msg


@pytest.mark.parametrize(
    ("patch", "needle"),
    [
        ({"protocol": "amqp"}, "protocol"),
        ({"run": ""}, "run"),
        ({"subscriptions": [{"topic": "a/#/b"}]}, "last level"),
        ({"subscriptions": [{"topic": "a/#"}, {"topic": "a/#"}]}, "twice"),
        ({"publications": [{"topic": "a/+", "count": 1, "rate_per_s": 1}]}, "wildcards"),
        ({"publications": [{"topic": "a", "count": -1, "rate_per_s": 1}]}, "count"),
        ({"publications": [{"topic": "a", "count": 1, "rate_per_s": 0}]}, "rate_per_s"),
        ({"subscriptions": [{"topic": "a", "qos": 3}]}, "qos"),
    ],
)
def test_malformed_workload_is_one_clear_line(patch: dict, needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_workload({**GOOD_WL, **patch})
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_workload_ignores_unknown_fields() -> None:
    assert parse_workload({**GOOD_WL, "future_field": 1}).agent == "a1"


def test_topic_mapping_and_client_ids() -> None:
    assert stomp_destination("a/b/c") == "/topic/a.b.c"
    assert stomp_destination("a/+/#") == "/topic/a.*.>"
    assert mqtt_topic("/topic/instance.status.X") == "instance/status/X"
    ids = {client_id("bfh", "run-1", "agent-1", f"s{i}") for i in range(3)} | {
        client_id("bfh", "run-1", "agent-1", "pub")
    }
    assert len(ids) == 4 and all(
        set(i) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") for i in ids
    )


MODULES = ["agent_under_test.reference", "agent_under_test.stomp_hostlist"] + [
    f"agent_under_test.defects.{d}" for d in DEFECTS
]


@pytest.mark.parametrize("module", ["agent_under_test.reference", "agent_under_test.defects.first_url_only"])
def test_cli_exits_2_with_one_line(tmp_path: Path, module: str) -> None:
    conf = tmp_path / "agent.conf"
    wl = tmp_path / "workload.json"
    conf.write_text("[agent]\nmb.urls = 127.0.0.1:notaport\nmb.password = hunter2\n")
    wl.write_text(json.dumps(GOOD_WL))
    cmd = [
        sys.executable,
        "-m",
        module,
        "--config",
        str(conf),
        "--workload",
        str(wl),
        "--log",
        str(tmp_path / "l"),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "mb.urls" in lines[0] and "hunter2" not in p.stderr
    wl.write_text("{not json")
    conf.write_text(GOOD_CONF)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "JSON" in p.stderr


def test_hostlist_refuses_mqtt_workload(tmp_path: Path) -> None:
    (tmp_path / "c").write_text(GOOD_CONF)
    (tmp_path / "w").write_text(json.dumps(GOOD_WL))
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent_under_test.stomp_hostlist",
            "--config",
            str(tmp_path / "c"),
            "--workload",
            str(tmp_path / "w"),
            "--log",
            str(tmp_path / "l"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("module", MODULES)
def test_every_agent_module_documents_itself(module: str) -> None:
    mod = importlib.import_module(module)
    assert mod.__doc__
    if ".defects." in module:
        assert "Caught by:" in mod.__doc__
        assert module.rsplit(".", 1)[1] in command(module.rsplit(".", 1)[1])
