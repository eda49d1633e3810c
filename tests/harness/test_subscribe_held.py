"""The subscribe-held entry's hold starts after the subscriber's CONNECT frame, whatever client id
it picked (harness/faultproxy/frames.py, the `limit_data` toxic's `frames`): a real paho client's
CONNECT passes whole, its SUBSCRIBE never does; a STOMP CONNECT frame likewise. No broker: a plain
socket reads what the client sends."""

from __future__ import annotations

import socket
import threading

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from harness.faultproxy.frames import frames_end


def _sent(client_id: str, username: str = "", password: str = "", subscribe: bool = True) -> bytes:
    """The bytes paho sends on connect and subscribe, pipelined (MQTT 3.1.1, durable session)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    c = mqtt.Client(
        callback_api_version=CallbackAPIVersion.VERSION2,
        client_id=client_id,
        clean_session=False,
        protocol=mqtt.MQTTv311,
    )
    if username:
        c.username_pw_set(username, password or None)
    t = threading.Thread(target=c.connect, args=("127.0.0.1", srv.getsockname()[1], 30), daemon=True)
    t.start()
    conn, _ = srv.accept()
    t.join(5)
    c.loop_write()
    if subscribe:
        c.subscribe("t/#", qos=1)
        c.loop_write()
    conn.settimeout(2)
    data = b""
    try:
        while chunk := conn.recv(4096):
            data += chunk
            if not subscribe or len(data) > frames_end(data, 1) + 8:
                break
    except TimeoutError:
        pass
    conn.close()
    srv.close()
    c.socket().close()
    return data


def test_the_connect_frame_ends_where_paho_ends_it_for_any_client_id():
    # the contract's long ids, two length bytes, a library's short random one, credentials
    for cid in ("bfh-r-sub-1-s0", "bfh-" + "x" * 130 + "-s1", "a1b2", "z"):
        connect = _sent(cid, subscribe=False)
        both = _sent(cid)
        assert frames_end(both, 1) == len(connect), cid
        assert both[len(connect)] >> 4 == 8, "what follows the CONNECT is the SUBSCRIBE"
        assert frames_end(both, 2) == len(both)
    assert frames_end(_sent("c", "user", "pw"), 1) == len(_sent("c", "user", "pw", subscribe=False))


def test_a_partial_frame_is_not_yet_known_and_an_unknown_stream_passes_nothing():
    both = _sent("a1b2")
    n = frames_end(both, 1)
    assert n is not None
    assert frames_end(both[:1], 1) is None  # the remaining length has not arrived
    assert frames_end(both[:2], 1) == n  # it has: the end is known before the bytes are
    assert frames_end(b"\x16\x03\x01", 1) == 0  # neither MQTT nor STOMP (a TLS hello): hold at once


def test_a_stomp_connect_frame_ends_at_its_nul():
    connect = b"CONNECT\naccept-version:1.2\nhost:/\nclient-id:x\n\n\x00"
    subscribe = b"\nSUBSCRIBE\nid:0\ndestination:/topic/t\nack:client\n\n\x00"
    assert frames_end(connect + subscribe, 1) == len(connect)
    assert frames_end(connect + subscribe, 2) == len(connect + subscribe)
    assert frames_end(connect[:5], 1) is None and frames_end(b"STO", 1) is None
