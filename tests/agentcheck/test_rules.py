"""The agent check's record and wire rules on synthetic logs (pure: no broker, no agent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.agentcheck import acks, findings, logcheck, process, rules, tap

URLS = ("127.0.0.1:1001", "127.0.0.1:1002")
SUB = "t/#"
CTX = logcheck.Context(run="r1", agent="a1", urls=URLS, filters=(SUB,), label="m.jsonl", stopped_ts=100.0)


def rec(event: str, ts: float = 10.0, **fields: Any) -> dict[str, Any]:
    return {"ts": ts, "run": "r1", "agent": "a1", "event": event, **fields}


def conn(
    event: str, role: str, broker: str = URLS[0], reason: str = "initial", ts: float = 10.0
) -> dict[str, Any]:
    return rec(event, ts, broker=broker, role=role, reason=reason)


def healthy() -> list[dict[str, Any]]:
    """A log the contract accepts: a failed attempt, connect, subscribe, publish, receive, stop."""
    pub, sub = "publisher", f"subscriber:{SUB}"
    return [
        conn("disconnected", sub, reason="connect_failed: refused: no"),
        conn("connected", sub, URLS[1]),
        rec("subscribed", topic=SUB, broker=URLS[1], qos=1, durable=True),
        conn("connected", pub, URLS[1]),
        rec("send_attempt", msg_id="m1", topic="t/a", broker=URLS[1], attempt=1, qos=1),
        rec("received", msg_id="m1", topic="t/a", broker=URLS[1], subscription=SUB),
        rec("sent", msg_id="m1", topic="t/a", broker=URLS[1], attempts=1, qos=1),
        conn("disconnected", pub, URLS[1], "connection_lost: x"),
        rec("send_attempt", msg_id="m2", topic="t/a", broker=None, attempt=1, qos=1, reason="no_broker"),
        conn("connected", pub, URLS[0], "reconnect"),
        rec("send_attempt", msg_id="m2", topic="t/a", broker=URLS[0], attempt=2, qos=1),
        rec("sent", msg_id="m2", topic="t/a", broker=URLS[0], attempts=2, qos=1),
        conn("disconnected", pub, URLS[0], "publications_complete"),
        conn("disconnected", sub, URLS[1], "shutdown", ts=101.0),
    ]


def lines_of(tmp_path: Path, records: list[Any], tail: bytes = b"") -> list[logcheck.Line]:
    path = tmp_path / "m.jsonl"
    path.write_bytes(b"".join((json.dumps(r) + "\n").encode() for r in records) + tail)
    return logcheck.read_lines(path)


def found(tmp_path: Path, records: list[Any], tail: bytes = b"") -> list[tuple[str, str | None]]:
    out = logcheck.check_log(lines_of(tmp_path, records, tail), CTX, sigterm=True)
    return [(f.rule, f.where) for f in out]


def test_a_log_that_keeps_the_contract_has_no_finding(tmp_path: Path) -> None:
    assert found(tmp_path, healthy()) == []


def test_a_missing_connected_is_named_at_the_first_record_on_no_connection(tmp_path: Path) -> None:
    log = healthy()
    del log[1]  # the subscriber's `connected`
    assert found(tmp_path, log) == [("C-8", "m.jsonl:5"), ("C-8", "m.jsonl:13")]


def test_a_failed_attempt_without_its_prefix_is_named(tmp_path: Path) -> None:
    log = healthy()
    log[0]["reason"] = "connection refused"
    assert found(tmp_path, log) == [("C-9", "m.jsonl:1")]


def test_a_missing_disconnected_and_a_wrong_connected_reason(tmp_path: Path) -> None:
    log = healthy()
    del log[7]  # the publisher's `disconnected` before its reconnect
    log[8]["reason"] = "initial"  # now line 9: the reconnect
    assert found(tmp_path, log) == [("C-9", "m.jsonl:9"), ("C-8", "m.jsonl:9")]


def test_field_types_and_names_each_event_rule(tmp_path: Path) -> None:
    log = healthy()
    log[2]["qos"] = "1"  # subscribed
    log[5]["subscription"] = "other/#"  # received
    del log[6]["attempts"]  # sent
    log[3]["role"] = "pub"  # connected
    log[8]["reason"] = "offline"  # send_attempt with no broker
    got = found(tmp_path, log)
    assert ("C-10", "m.jsonl:3") in got and ("C-15", "m.jsonl:6") in got
    assert ("C-13", "m.jsonl:7") in got and ("C-7", "m.jsonl:4") in got and ("C-12", "m.jsonl:9") in got


def test_envelope_torn_lines_and_unknown_events(tmp_path: Path) -> None:
    log = [*healthy(), "not an object", rec("debug"), {**rec("received"), "run": "r2"}]
    got = found(tmp_path, log, tail=b'{"ts": 1')
    assert [r for r, _ in got].count("C-6") >= 4
    assert ("C-6", "m.jsonl:18") in got  # the torn last line


def test_attempt_numbers_and_the_counts_of_sent_and_dropped(tmp_path: Path) -> None:
    log = healthy()
    log[10]["attempt"] = 3
    log[11]["attempts"] = 1
    assert found(tmp_path, log) == [("C-12", "m.jsonl:11"), ("C-13", "m.jsonl:12")]


def test_publishing_before_every_subscription_and_sigterm(tmp_path: Path) -> None:
    log = healthy()
    log[2], log[4] = log[4], log[2]  # send_attempt before subscribed (both on open connections)
    log[13]["reason"] = "closed"
    got = found(tmp_path, log)
    assert ("C-17", "m.jsonl:3") in got and ("C-21", "m.jsonl:14") in got
    assert ("C-21", "m.jsonl:2") in found(tmp_path, healthy()[:-1])  # never closed at SIGTERM


def _offsets(lines: list[logcheck.Line], no: int) -> tuple[int, int]:
    ln = next(x for x in lines if x.no == no)
    return ln.start, ln.end


def test_received_before_the_ack_and_sent_after_it_by_log_offset(tmp_path: Path) -> None:
    lines = lines_of(tmp_path, healthy())
    _, recv_end = _offsets(lines, 6)
    sent_start, _ = _offsets(lines, 7)
    ok: list[dict[str, Any]] = [
        {"kind": "delivery_acked", "msg_id": "m1", "filters": [SUB], "log_size": recv_end, "broker": URLS[1]},
        {"kind": "publish_acked", "msg_id": "m1", "log_size": sent_start, "broker": URLS[1]},
        {"kind": "publish_acked", "msg_id": "m2", "log_size": 0, "broker": URLS[0]},
        {"kind": "published", "msg_id": "m1", "broker": URLS[1]},
    ]
    assert acks.check_wire(lines, ok, CTX) == []
    late = [{**ok[0], "log_size": recv_end - 1}, {**ok[1], "log_size": sent_start + 1}, ok[2], ok[3], ok[3]]
    got = [(f.rule, f.where) for f in acks.check_wire(lines, late, CTX)]
    assert got == [("C-15", "m.jsonl:6"), ("C-13", "m.jsonl:7"), ("C-12", "m.jsonl:5")]
    elsewhere = [{**ok[0], "broker": URLS[0]}, {**ok[1], "broker": URLS[0]}, ok[2]]
    got = [(f.rule, f.where) for f in acks.check_wire(lines, elsewhere, CTX)]
    assert got == [("C-15", "m.jsonl:6"), ("C-13", "m.jsonl:7")]  # they name another broker
    never = [{**ok[0], "msg_id": "m9"}]
    assert [f.rule for f in acks.check_wire(lines, never, CTX)] == ["C-15", "C-13", "C-13"]


def test_exit_status_rules(tmp_path: Path) -> None:
    out = tmp_path / "agent.out"
    out.write_text("boom\n")
    assert process.check_exit(0, False, out) == []
    assert [f.rule for f in process.check_exit(-9, False, out)] == ["C-21"]
    assert "boom" in process.check_exit(3, True, out)[0].what


def test_every_rule_is_stated_in_the_contract_document() -> None:
    assert findings.missing_rules() == []
    for rule_id in rules.RULES:
        where = findings.contract_line(rule_id)
        assert where is not None
        line = Path(findings._doc()[0]).read_text(encoding="utf-8").splitlines()[int(where.split(":")[1]) - 1]  # type: ignore[index]
        assert line.startswith(f"**{rule_id}**"), (rule_id, line)


@pytest.mark.parametrize("chunk", [1, 3, 1000])
def test_the_tap_parses_mqtt_packets_across_chunks(chunk: int) -> None:
    payload = json.dumps({"msg_id": "a-0-1", "sent_ts": 1.0}).encode()
    publish = bytes([0x32, 2 + 3 + 2 + len(payload)]) + b"\x00\x03t/a" + b"\x00\x07" + payload
    puback = b"\x40\x02\x00\x07"
    buf, got = bytearray(), []
    stream = publish + puback
    for i in range(0, len(stream), chunk):
        got += tap._packets(buf, stream[i : i + chunk])
    assert [k for k, _, _ in got] == [tap.PUBLISH, tap.PUBACK] and not buf
    assert tap._publish(got[0][1], got[0][2]) == (7, "a-0-1")


def test_the_contract_ships_with_the_package() -> None:
    """harness/agentcheck/agent-contract.md (package data) is docs/agent-contract.md itself."""
    shipped = Path(findings.__file__).with_name("agent-contract.md")
    assert shipped.resolve() == (Path(findings.__file__).parents[2] / findings.DOC).resolve()


def test_the_stomp_tap_reads_sends_receipts_messages_and_acks() -> None:
    from harness.agentcheck import stomptap

    assert stomptap.mqtt_filter("/topic/instance.*.>") == "instance/+/#"
    events: list[tuple[str, dict[str, Any]]] = []
    conn = stomptap.StompConn(lambda kind, **f: events.append((kind, f)), lambda: 42)
    body = json.dumps({"msg_id": "a-0-1"}).encode()
    conn.from_agent(b"SUBSCRIBE\nid:s0\ndestination:/topic/t.>\nack:client-individual\n\n\0")
    conn.from_agent(b"SEND\ndestination:/topic/t.a\nreceipt:r1\n\n" + body + b"\0\n")
    conn.from_broker(b"\nRECEIPT\nreceipt-id:r1\n\n\0MESSAGE\nsubscription:s0\nack:k7\n")
    conn.from_broker(b"content-length:%d\n\n" % len(body) + body + b"\0")
    conn.from_agent(b"ACK\nid:k7\n\n\0")
    assert [k for k, _ in events] == ["published", "publish_acked", "delivery_acked"]
    assert events[2][1] == {"msg_id": "a-0-1", "filters": ["t/#"], "log_size": 42}


def test_the_tap_notes_the_log_size_before_it_passes_an_ack_on(tmp_path: Path) -> None:
    """Real sockets: agent -> tap -> a stand-in broker that answers a PUBLISH with its PUBACK."""
    import socket
    import threading

    log = tmp_path / "messages.jsonl"
    log.write_bytes(b"0123456789")
    broker = socket.create_server(("127.0.0.1", 0))
    payload = json.dumps({"msg_id": "a-0-1"}).encode()
    publish = bytes([0x32, 2 + 3 + 2 + len(payload)]) + b"\x00\x03t/a\x00\x05" + payload

    def serve() -> None:
        s, _ = broker.accept()
        got = b""
        while len(got) < len(publish):
            got += s.recv(4096)
        s.sendall(b"\x40\x02\x00\x05")  # PUBACK, packet id 5
        s.recv(10)
        s.close()

    threading.Thread(target=serve, daemon=True).start()
    t = tap.Tap(log)
    try:
        host, port = t.relay("127.0.0.1:1", f"127.0.0.1:{broker.getsockname()[1]}").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as agent:
            agent.sendall(publish)
            assert agent.recv(4) == b"\x40\x02\x00\x05"
    finally:
        t.stop()
        broker.close()
    acked = [e for e in t.events if e["kind"] == "publish_acked"]
    assert acked and acked[0]["msg_id"] == "a-0-1" and acked[0]["log_size"] == 10, t.events


def test_a_malformed_workload_must_end_the_agent_with_a_reason_and_no_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C-2 and C-5 with the agent alone (no broker): the reference passes, three bad agents do not."""
    from harness.agentcheck import inputs
    from harness.agents.launch import REFERENCE_COMMAND

    monkeypatch.setattr(inputs, "PROBE_TIMEOUT_S", 3.0)
    assert inputs.check_malformed(REFERENCE_COMMAND, tmp_path / "ref") == []
    py = "{python} -c"
    cases = {
        "hangs": (f"{py} 'import time; time.sleep(30)'", ["C-2"]),
        "exit0": (f"{py} 'pass'", ["C-2"]),
        "leaks": (f"{py} 'import sys; print(open(sys.argv[1]).read()); sys.exit(2)' {{config}}", ["C-5"]),
    }
    for name, (command, want) in cases.items():
        got = inputs.check_malformed(command, tmp_path / name)
        assert [f.rule for f in got] == want, (name, got)


def test_the_c21_line_never_quotes_the_checks_password(tmp_path: Path) -> None:
    """agent.out's last line printed the password of agent.conf: C-21 quotes it redacted."""
    out = tmp_path / "agent.out"
    out.write_text(f"starting\nfatal: login as bfh/{findings.PASSWORD} refused\n")
    (f,) = process.check_exit(3, False, out)
    assert f.rule == "C-21" and findings.PASSWORD not in json.dumps(f.to_dict())
    assert f"login as bfh/{findings.REDACTED} refused" in f.what
