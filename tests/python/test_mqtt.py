"""MQTT front door (`sluice serve --mqtt-listen`) against a real `sluice serve`, with the
`paho-mqtt` client (MQTT 5 and 3.1.1) and Debian's `mosquitto_pub`; rows read back with
Python `deltalake` and `polars`.

Contracts under test: a PUBACK (QoS 1) or PUBREC/PUBCOMP (QoS 2) means the records are
durable, and they land in Delta exactly as published; a JSON object or an array of objects
is records; credentials are a client id/secret or a Bearer token, refused with CONNACK 0x86
(3.1.1: return code 4); a topic that is not a table, an unknown table or a second table on
one connection gets 0x90, a table without a grant 0x87, a record that does not fit 0x99 with
the field named (or lands in `_rescued_data` when the table has it) while other connections
keep flowing; many device connections publish QoS 1 at once; a SIGKILL of the pod mid-run
loses no PUBACKed record and duplicates none.
"""

import concurrent.futures
import json
import os
import socket
import signal
import struct
import subprocess
import threading
import time

import paho.mqtt.client as mqtt
import polars as pl
import pytest
import requests
from deltalake import DeltaTable
from paho.mqtt.enums import CallbackAPIVersion

from conftest import CLIENT_ID, CLIENT_SECRET, Server, free_port, metric

COLUMNS = [{"name": "id", "type_text": "bigint", "type_name": "LONG", "nullable": False},
           {"name": "temp", "type_text": "double", "type_name": "DOUBLE", "nullable": True}]
TABLE = "main.mqtt.t"
# Device connections of the concurrency test (the number; lower it on a slow box).
DEVICES = int(os.environ.get("SLUICE_TEST_MQTT_DEVICES", "1000"))


class MqttServer(Server):
    """A pod that also serves MQTT on its own port."""

    def __init__(self, data_dir, extra=(), tls=None, flush_interval="200ms", mqtt_port=None):
        self.mqtt_port = mqtt_port or free_port()
        super().__init__(data_dir, flush_interval,
                         extra=("--mqtt-listen", f"127.0.0.1:{self.mqtt_port}", *extra), tls=tls)

    def kill(self):
        self.proc.kill()
        self.proc.wait(timeout=30)
        self.log.close()


def create_table(server, name=TABLE, properties=None):
    body = {"name": name, "columns": COLUMNS}
    if properties:
        body["properties"] = properties
    return server.api("POST", "", body)["storage_location"]


def rows_in_delta(location, expect, timeout=30):
    """The rows (sorted by id, as dicts of id and temp) once `expect` are there."""
    deadline = time.time() + timeout
    while True:
        try:
            df = pl.from_arrow(DeltaTable(location).to_pyarrow_table())
        except Exception:  # no commit yet
            df = None
        n = 0 if df is None else df.height
        if n >= expect or time.time() > deadline:
            if df is None:
                return []
            return df.sort("id").select(["id", "temp"]).to_dicts()
        time.sleep(0.2)


def disconnect_and_join(client, timeout=30):
    """Send DISCONNECT and wait for paho's network thread to end. Not `loop_stop()`: after a
    DISCONNECT the thread ends on its own and sets `client._thread` to None, and paho 2.2's
    `loop_stop` reads that attribute twice, so it can fail with "'NoneType' object has no
    attribute 'join'" (seen in CI). The thread object is taken before it can go away."""
    thread = client._thread
    client.disconnect()
    if thread is not None:
        thread.join(timeout)
        assert not thread.is_alive(), "paho's network thread did not end after DISCONNECT"


class Device:
    """A paho client that connects and publishes synchronously, keeping the reason codes."""

    def __init__(self, port, version=mqtt.MQTTv5, username=CLIENT_ID, password=CLIENT_SECRET,
                 client_id="", keepalive=30, tls_ca=None):
        self.version = version
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id,
                                  protocol=version)
        if tls_ca:
            self.client.tls_set(ca_certs=tls_ca)
        if username is not None:
            self.client.username_pw_set(username, password)
        self.connected = threading.Event()
        self.disconnected = threading.Event()
        self.connack = None
        self.disconnect_reason = None
        self.acks = {}
        self.acked = threading.Condition()
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_publish = self._on_publish
        self.port = port
        self.keepalive = keepalive

    def _on_connect(self, client, userdata, flags, reason_code, properties):
        self.connack = (reason_code.value, getattr(properties, "ReasonString", None))
        self.connected.set()

    def _on_disconnect(self, client, userdata, flags, reason_code, properties):
        self.disconnect_reason = (reason_code.value, getattr(properties, "ReasonString", None))
        self.disconnected.set()
        self.connected.set()

    def _on_publish(self, client, userdata, mid, reason_code, properties):
        with self.acked:
            self.acks[mid] = (reason_code.value, getattr(properties, "ReasonString", None))
            self.acked.notify_all()

    def connect(self, timeout=30):
        """The CONNACK reason code (v5) or return code (3.1.1) and reason string."""
        self.client.connect("127.0.0.1", self.port, keepalive=self.keepalive)
        self.client.loop_start()
        assert self.connected.wait(timeout), "no CONNACK"
        return self.connack

    def publish_async(self, payload, qos=1, topic=TABLE):
        data = payload if isinstance(payload, (bytes, str)) else json.dumps(payload)
        return self.client.publish(topic, data, qos=qos).mid

    def wait_ack(self, mid, timeout=30):
        """The PUBACK/PUBCOMP reason code and string of `mid`."""
        deadline = time.time() + timeout
        with self.acked:
            while mid not in self.acks:
                left = deadline - time.time()
                assert left > 0 and not self.disconnected.is_set(), (
                    f"no ack for {mid}; disconnect {self.disconnect_reason}")
                self.acked.wait(min(left, 0.2))
            return self.acks[mid]

    def publish(self, payload, qos=1, topic=TABLE, timeout=30):
        return self.wait_ack(self.publish_async(payload, qos, topic), timeout)

    def close(self):
        disconnect_and_join(self.client)


@pytest.fixture
def server(tmp_path):
    s = MqttServer(tmp_path)
    yield s
    s.stop()


@pytest.mark.parametrize("version", [mqtt.MQTTv5, mqtt.MQTTv311], ids=["v5", "v311"])
def test_paho_publishes_objects_and_arrays_at_every_qos_and_rows_read_back(server, version):
    location = create_table(server)
    device = Device(server.mqtt_port, version=version, client_id="sensor-1")
    assert device.connect()[0] == 0
    assert device.publish({"id": 1, "temp": 20.5}, qos=1)[0] == 0
    assert device.publish([{"id": 2, "temp": 21.0}, {"id": 3}], qos=1)[0] == 0
    assert device.publish({"id": 4, "temp": -3.25}, qos=2)[0] == 0  # PUBCOMP after PUBREC
    mid = device.publish_async({"id": 5, "temp": 0.0}, qos=0)
    # QoS 0 has no ack: a QoS 1 publish after it is answered after it (answers keep order).
    assert device.publish({"id": 6}, qos=1)[0] == 0
    device.close()
    assert mid is not None
    rows = rows_in_delta(location, 6)
    assert rows == [{"id": 1, "temp": 20.5}, {"id": 2, "temp": 21.0}, {"id": 3, "temp": None},
                    {"id": 4, "temp": -3.25}, {"id": 5, "temp": 0.0}, {"id": 6, "temp": None}]


def test_mosquitto_pub_v5_and_v311_with_a_secret_or_a_bearer_token(server):
    location = create_table(server)
    base = ["mosquitto_pub", "-h", "127.0.0.1", "-p", str(server.mqtt_port), "-t", TABLE, "-d"]
    runs = [
        (["-V", "mqttv5", "-q", "1", "-u", CLIENT_ID, "-P", CLIENT_SECRET], {"id": 10, "temp": 1.5}),
        (["-V", "mqttv311", "-q", "2", "-u", CLIENT_ID, "-P", CLIENT_SECRET], [{"id": 11}, {"id": 12}]),
        (["-V", "mqttv5", "-q", "1", "-u", "anyone", "-P", "Bearer " + server.token()], {"id": 13}),
    ]
    for flags, payload in runs:
        out = subprocess.run(base + flags + ["-m", json.dumps(payload)], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "received PUBACK" in out.stdout or "received PUBCOMP" in out.stdout, out.stdout
    bad = subprocess.run(base + ["-V", "mqttv5", "-q", "1", "-u", CLIENT_ID, "-P", "wrong",
                                 "-m", "{}"], capture_output=True, text=True, timeout=60)
    assert "received CONNACK (134)" in bad.stdout, bad.stdout
    assert "Bad User Name or Password" in bad.stderr, bad.stderr
    misfit = subprocess.run(base + ["-V", "mqttv5", "-q", "1", "-u", CLIENT_ID, "-P", CLIENT_SECRET,
                                    "-m", '{"id": "x"}'], capture_output=True, text=True, timeout=60)
    assert "RC:153" in misfit.stdout, misfit.stdout
    assert "Payload format invalid" in misfit.stderr and "`id`" in misfit.stderr, misfit.stderr
    assert [r["id"] for r in rows_in_delta(location, 4)] == [10, 11, 12, 13]


def test_credentials_and_grants_are_refused_with_their_reason_codes(server):
    location = create_table(server)
    create_table(server, "main.mqtt.other")
    # Wrong secret, unknown client, no password, a bad token: CONNACK 0x86 (3.1.1: 4).
    for user, password in [(CLIENT_ID, "wrong"), ("nobody", "x" * 40), (CLIENT_ID, None),
                           ("x", "Bearer not-a-token")]:
        d = Device(server.mqtt_port, username=user, password=password)
        code, why = d.connect()
        assert code == 0x86 and why, (user, password, code, why)
        d.client.loop_stop()
        # paho reports 3.1.1 return codes as v5 reason codes: read the byte itself.
        sock, connack = raw_connect(server.mqtt_port, version=4, user=user,
                                    password=password or "", expect=None)
        assert connack == b"\x20\x02\x00\x04", connack
        assert read_all(sock) == b""
    # A principal with MODIFY on TABLE only.
    admin = {"Authorization": "Bearer " + server.token()}
    created = requests.post(server.url + "/api/sluice/v1/principals", json={"name": "writer"},
                            headers=admin, timeout=10).json()
    r = requests.patch(server.url + "/api/2.1/unity-catalog/permissions/table/" + TABLE,
                       json={"changes": [{"principal": "writer", "add": ["MODIFY"]}]},
                       headers=admin, timeout=10)
    assert r.status_code == 200, r.text
    writer = Device(server.mqtt_port, username=created["client_id"],
                    password=created["client_secret"])
    assert writer.connect()[0] == 0
    code, why = writer.publish({"id": 1}, topic="main.mqtt.other")
    assert code == 0x87 and "holds no MODIFY on table `main.mqtt.other`" in why, (code, why)
    assert writer.publish({"id": 1})[0] == 0
    # One table per connection: a second table is refused, the first keeps working.
    code, why = writer.publish({"id": 2}, topic="main.mqtt.other")
    assert code == 0x90 and "one table per connection" in why, (code, why)
    assert writer.publish({"id": 2})[0] == 0
    writer.close()
    # Not a table name, and a table that does not exist: 0x90.
    d = Device(server.mqtt_port)
    assert d.connect()[0] == 0
    code, why = d.publish({"id": 9}, topic="sensors/room1")
    assert code == 0x90 and "catalog.schema.table" in why, (code, why)
    code, why = d.publish({"id": 9}, topic="main.mqtt.nope")
    assert code == 0x90 and "does not exist" in why, (code, why)
    d.close()
    assert [r["id"] for r in rows_in_delta(location, 2)] == [1, 2]
    # Each refusal counted once in sluice_refusals_total by its gRPC code: 8 bad
    # credentials, no MODIFY, a second table and a bad topic name, an unknown table; the 2
    # records in sluice_mqtt_records_total and none in sluice_rest_records_total.
    assert refusals(server) == {"Unauthenticated": 8, "PermissionDenied": 1,
                                "InvalidArgument": 2, "NotFound": 1,
                                "sluice_mqtt_records_total": 2}, refusals(server)


def test_a_misfit_record_gets_0x99_naming_the_field_while_another_connection_flows(server):
    location = create_table(server)
    rescued_location = create_table(server, "main.mqtt.rescued", {"sluice.rescuedData": "true"})
    flowing = Device(server.mqtt_port)
    assert flowing.connect()[0] == 0
    mids = [flowing.publish_async({"id": 100 + i, "temp": float(i)}) for i in range(200)]
    bad = Device(server.mqtt_port)
    assert bad.connect()[0] == 0
    code, why = bad.publish({"id": "seven", "temp": 1.0})
    assert code == 0x99 and "`id`" in why, (code, why)
    code, why = bad.publish(b"not json")
    assert code == 0x99 and "JSON" in why, (code, why)
    code, why = bad.publish([{"id": 1}, 5])
    assert code == 0x99 and "record 1" in why, (code, why)
    # The refused publishes cost the connection nothing: the next one is written.
    assert bad.publish({"id": 99})[0] == 0
    bad.close()
    assert all(flowing.wait_ack(m)[0] == 0 for m in mids)
    flowing.close()
    rows = rows_in_delta(location, 201)
    assert [r["id"] for r in rows] == [99] + list(range(100, 300))
    # With `_rescued_data`, the misfit lands there instead.
    rescuer = Device(server.mqtt_port)
    assert rescuer.connect()[0] == 0
    assert rescuer.publish({"id": 1, "temp": "warm"}, topic="main.mqtt.rescued")[0] == 0
    rescuer.close()
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            df = pl.from_arrow(DeltaTable(rescued_location).to_pyarrow_table())
            if df.height:
                break
        except Exception:
            pass
        time.sleep(0.2)
    assert df.select(["id", "temp", "_rescued_data"]).to_dicts() == [
        {"id": 1, "temp": None, "_rescued_data": '{"temp":"warm"}'}]


def test_misfits_and_fits_of_many_connections_gathered_together_are_answered_one_by_one(server):
    """One-record publishes of many connections share writes (mqtt/coalesce.rs): a misfit
    among them is refused alone, naming its field, and every other record lands once."""
    location = create_table(server)
    devices = [Device(server.mqtt_port) for _ in range(20)]
    for d in devices:
        assert d.connect()[0] == 0
    sent = []  # (device, mid, id, fits)
    for n in range(50):
        for k, d in enumerate(devices):
            ident = k * 1000 + n
            fits = ident % 7 != 3
            body = {"id": ident, "temp": 1.5} if fits else {"id": f"x{ident}", "temp": 1.5}
            sent.append((d, d.publish_async(body), ident, fits))
    for d, mid, ident, fits in sent:
        code, why = d.wait_ack(mid)
        if fits:
            assert code == 0, (ident, code, why)
        else:
            assert code == 0x99 and "`id`" in why, (ident, code, why)
    for d in devices:
        d.close()
    good = sorted(i for _, _, i, fits in sent if fits)
    rows = rows_in_delta(location, len(good))
    assert [r["id"] for r in rows] == good
    text = server.metrics()
    records = metric(text, "sluice_mqtt_records_total")
    writes = metric(text, "sluice_mqtt_gathered_writes_total")
    assert records == len(good), records
    # Gathered: fewer writes than records (each write is one WAL frame).
    assert 0 < writes < records, (writes, records)


def mqtt_string(b):
    return struct.pack(">H", len(b)) + b


def connect_packet(keepalive=0, version=5, user=CLIENT_ID, password=CLIENT_SECRET,
                   client_id=b"raw", clean=True):
    """A CONNECT's bytes."""
    s = mqtt_string
    flags = (0x02 if clean else 0) | 0x80 | 0x40
    var = s(b"MQTT") + bytes([version, flags]) + struct.pack(">H", keepalive)
    if version == 5:
        var += b"\x00"  # no properties
    body = var + s(client_id) + s(user.encode()) + s(password.encode())
    assert len(body) < 128
    return bytes([0x10, len(body)]) + body


def raw_connect(port, keepalive=0, version=5, user=CLIENT_ID, password=CLIENT_SECRET, expect=0,
                client_id=b"raw", clean=True):
    """A socket after a hand-made CONNECT (for what no well-behaved client sends); with
    `expect=None`, the socket and the CONNACK's bytes."""
    packet = connect_packet(keepalive, version, user, password, client_id, clean)
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(packet)
    head = sock.recv(2)
    assert head[:1] == b"\x20", head
    connack = head + sock.recv(head[1])
    if expect is None:
        return sock, connack
    assert connack[3] == expect, connack
    return sock


def read_all(sock):
    out = b""
    while True:
        chunk = sock.recv(4096)
        if not chunk:
            return out
        out += chunk


def packet(first, body):
    """An MQTT packet: first byte, remaining length (variable byte integer), body."""
    n, length = len(body), b""
    while True:
        byte, n = n & 0x7F, n >> 7
        length += bytes([byte | (0x80 if n else 0)])
        if not n:
            return bytes([first]) + length + body


def read_packet(sock):
    """(first byte, body) of the next packet, or None once the server closed."""
    head = sock.recv(1)
    if not head:
        return None
    length, shift = 0, 0
    while True:
        byte = sock.recv(1)[0]
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    body = b""
    while len(body) < length:
        body += sock.recv(length - len(body))
    return head[0], body


def publish_packet(ident, payload, qos=1, retain=False, properties=b"\x00", topic=TABLE):
    """A v5 PUBLISH's bytes."""
    body = mqtt_string(topic.encode()) + struct.pack(">H", ident) + properties + payload
    return packet(0x30 | (qos << 1) | (1 if retain else 0), body)


def refusals(server):
    """`sluice_refusals_total` by code, and the records counters, from one scrape."""
    text = requests.get(server.url + "/metrics", timeout=10).text
    out = {}
    for line in text.splitlines():
        if line.startswith(('sluice_refusals_total{code="', "sluice_mqtt_records_total ",
                            "sluice_rest_records_total ")):
            name, value = line.rsplit(" ", 1)
            out[name.replace('sluice_refusals_total{code="', "").rstrip('"}')] = float(value)
    return out


def delta(before, after):
    """What each series grew by (only those that moved)."""
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


def test_unserved_packets_client_ids_and_the_receive_maximum(server):
    """What no well-behaved client sends, by hand, each answered and counted once in
    `sluice_refusals_total{code}`: SUBSCRIBE, UNSUBSCRIBE and AUTH → DISCONNECT 0x83 (3.1.1:
    closed); the retain flag → 0x9A; a topic alias → 0x94; a second CONNECT → 0x82; an empty
    client id with clean start 0 → CONNACK 0x85 (3.1.1: return code 2); an empty client id
    with clean start 1 (v5) → an assigned one in CONNACK; a 65th QoS 1/2 PUBLISH
    unacknowledged → DISCONNECT 0x93 Receive Maximum exceeded. The accepted records count in
    `sluice_mqtt_records_total`, not in `sluice_rest_records_total`."""
    location = create_table(server)
    before = refusals(server)
    s = mqtt_string
    for name, bytes_ in [
        ("SUBSCRIBE", packet(0x82, b"\x00\x01" + b"\x00" + s(b"a/b") + b"\x01")),
        ("UNSUBSCRIBE", packet(0xA2, b"\x00\x01" + b"\x00" + s(b"a/b"))),
        ("AUTH", packet(0xF0, b"\x18\x00")),
        ("retain", publish_packet(1, b'{"id": 1}', retain=True)),
        ("topic alias", publish_packet(1, b'{"id": 1}', properties=b"\x03\x23\x00\x01")),
        ("second CONNECT", connect_packet()),
    ]:
        sock = raw_connect(server.mqtt_port)
        sock.sendall(bytes_)
        answer = read_packet(sock)
        expected = {"SUBSCRIBE": 0x83, "UNSUBSCRIBE": 0x83, "AUTH": 0x83, "retain": 0x9A,
                    "topic alias": 0x94, "second CONNECT": 0x82}[name]
        assert answer is not None and answer[0] == 0xE0 and answer[1][0] == expected, (name, answer)
        assert read_packet(sock) is None, name
    # 3.1.1 has no DISCONNECT from the server: closed.
    sock = raw_connect(server.mqtt_port, version=4)
    sock.sendall(packet(0x82, b"\x00\x01" + s(b"a/b") + b"\x01"))
    assert read_all(sock) == b""
    # An empty client id asking to keep its session: identifier rejected.
    sock, connack = raw_connect(server.mqtt_port, version=4, client_id=b"", clean=False,
                                expect=None)
    assert connack == b"\x20\x02\x00\x02", connack
    assert read_all(sock) == b""
    sock = socket.create_connection(("127.0.0.1", server.mqtt_port), timeout=30)
    sock.sendall(connect_packet(version=5, client_id=b"", clean=False))
    first, connack = read_packet(sock)
    assert first == 0x20 and connack[1] == 0x85 and b"needs clean start" in connack, connack
    assert read_all(sock) == b""
    # An empty client id with clean start 1 on v5: assigned in CONNACK.
    d = Device(server.mqtt_port, client_id="")
    props = {}
    d.client.on_connect = lambda c, u, f, rc, p: (props.update(
        assigned=getattr(p, "AssignedClientIdentifier", None)), d.connected.set())
    d.client.connect("127.0.0.1", server.mqtt_port)
    d.client.loop_start()
    assert d.connected.wait(30)
    assert props["assigned"] and props["assigned"].startswith("sluice-"), props
    d.client.loop_stop()
    d.client.disconnect()
    # Receive maximum 64: 64 QoS 2 publishes answered PUBREC and never released hold all 64;
    # one more QoS 1 publish is over it.
    sock = raw_connect(server.mqtt_port)
    sock.sendall(b"".join(publish_packet(i, json.dumps({"id": i}).encode(), qos=2)
                          for i in range(1, 65)))
    recs = [read_packet(sock) for _ in range(64)]
    assert all(r[0] == 0x50 and (len(r[1]) == 2 or r[1][2] == 0) for r in recs), [
        r for r in recs if not (r[0] == 0x50 and (len(r[1]) == 2 or r[1][2] == 0))]
    sock.sendall(publish_packet(65, b'{"id": 65}', qos=1))
    answer = read_packet(sock)
    assert answer[0] == 0xE0 and answer[1][0] == 0x93, answer
    assert b"receive maximum of 64" in answer[1], answer
    assert read_packet(sock) is None
    assert len(rows_in_delta(location, 64)) == 64
    # Each refusal counted once, by the gRPC code of the same meaning; 64 records.
    moved = delta(before, refusals(server))
    assert moved == {"Unimplemented": 6, "InvalidArgument": 3, "ResourceExhausted": 1,
                     "sluice_mqtt_records_total": 64}, moved


def test_keep_alive_packet_size_and_malformed_packets_are_answered_then_closed(tmp_path):
    server = MqttServer(tmp_path, extra=("--max-request-bytes", "1024", "--max-record-bytes", "1024"))
    try:
        create_table(server)
        # Keep alive 1 s and silence: DISCONNECT 0x8D after 1.5 s.
        sock = raw_connect(server.mqtt_port, keepalive=1)
        started = time.time()
        got = read_all(sock)
        assert got[:1] == b"\xe0" and got[2] == 0x8D, got
        assert 1.3 < time.time() - started < 10
        # A packet over the maximum packet size (1024, advertised in CONNACK): 0x95.
        sock = raw_connect(server.mqtt_port)
        topic = TABLE.encode()
        body = struct.pack(">H", len(topic)) + topic + b"\x00\x01\x00" + b"{" + b" " * 2000 + b"}"
        length = len(body)
        sock.sendall(bytes([0x32, (length & 0x7F) | 0x80, length >> 7]) + body)
        got = read_all(sock)
        assert got[:1] == b"\xe0" and got[2] == 0x95, got
        # Garbage after CONNECT: DISCONNECT 0x81 Malformed packet.
        sock = raw_connect(server.mqtt_port)
        sock.sendall(b"\x00\x00")
        got = read_all(sock)
        assert got[:1] == b"\xe0" and got[2] == 0x81, got
        # Not MQTT at all: closed without a word.
        sock = socket.create_connection(("127.0.0.1", server.mqtt_port), timeout=30)
        sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
        assert read_all(sock) == b""
        # The pod still serves MQTT.
        d = Device(server.mqtt_port)
        assert d.connect()[0] == 0 and d.publish({"id": 1})[0] == 0
        d.close()
    finally:
        server.stop()


def test_a_redelivered_qos2_publish_is_written_once(server):
    """QoS 2 by hand: PUBLISH id 5, PUBREC; the same PUBLISH again with DUP set (a client that
    missed the PUBREC): PUBREC again, nothing written; PUBREL → PUBCOMP; a PUBREL of an id
    never seen → PUBCOMP 0x92 Packet Identifier not found."""
    location = create_table(server)
    sock = raw_connect(server.mqtt_port)
    topic = TABLE.encode()
    body = struct.pack(">H", len(topic)) + topic + b"\x00\x05" + b"\x00" + b'{"id": 42}'

    def answer():
        """(packet type, packet id, reason code) of the next ack."""
        head = sock.recv(2)
        rest = sock.recv(head[1])
        return head[0] >> 4, struct.unpack(">H", rest[:2])[0], rest[2] if len(rest) > 2 else 0

    sock.sendall(bytes([0x34, len(body)]) + body)
    assert answer() == (5, 5, 0)  # PUBREC id 5, success
    sock.sendall(bytes([0x3C, len(body)]) + body)  # DUP
    assert answer() == (5, 5, 0)
    sock.sendall(b"\x62\x02\x00\x05")
    assert answer() == (7, 5, 0)  # PUBCOMP id 5
    sock.sendall(b"\x62\x02\x00\x09")
    assert answer() == (7, 9, 0x92)
    sock.sendall(b"\xe0\x00")
    assert read_all(sock) == b""
    # The same id after PUBCOMP is a new message: written.
    d = Device(server.mqtt_port)
    assert d.connect()[0] == 0 and d.publish({"id": 43}, qos=2)[0] == 0
    d.close()
    time.sleep(1)
    assert [r["id"] for r in rows_in_delta(location, 2)] == [42, 43]


def test_sigterm_answers_the_writes_under_way_then_disconnects_0x8b(tmp_path):
    """A graceful stop: a connected device gets DISCONNECT 0x8B Server shutting down, and what
    it had PUBACKed before is in Delta after the restart."""
    server = MqttServer(tmp_path)
    location = create_table(server)
    d = Device(server.mqtt_port)
    assert d.connect()[0] == 0 and d.publish({"id": 1})[0] == 0
    sock = raw_connect(server.mqtt_port)
    server.stop()
    got = read_all(sock)
    assert got[:1] == b"\xe0" and got[2] == 0x8B, got
    assert d.disconnected.wait(30) and d.disconnect_reason[0] == 0x8B, d.disconnect_reason
    d.client.loop_stop()
    restarted = MqttServer(tmp_path)
    try:
        assert rows_in_delta(location, 1) == [{"id": 1, "temp": None}]
    finally:
        restarted.stop()


def run_devices(port, first, count, per, release, close_at):
    """Devices `first..first + count` (one paho client and thread each) connect, publish `per`
    records QoS 1 each, wait for their PUBACKs, and stay connected until the file `release`
    exists (or `close_at`). Runs in a
    process of its own: paho's select() takes no file descriptor above 1023."""
    def device(n):
        d = Device(port, client_id=f"dev-{n}", keepalive=120)
        code = d.connect(timeout=120)[0]
        if code != 0:
            return [code]
        mids = [d.publish_async({"id": n * per + k, "temp": float(n)}) for k in range(per)]
        codes = [d.wait_ack(m, timeout=300)[0] for m in mids]
        while not os.path.exists(release) and time.time() < close_at:
            time.sleep(0.2)
        d.close()
        return codes

    with concurrent.futures.ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(device, range(first, first + count)))


def test_many_device_connections_publish_qos1_at_once(server, tmp_path):
    """DEVICES connections publish 3 records QoS 1 each and are all open at once."""
    location = create_table(server)
    per, chunk = 3, 200
    release = str(tmp_path / "release")
    close_at = time.time() + 60 + DEVICES / 20
    started = time.time()
    with concurrent.futures.ProcessPoolExecutor(max_workers=(DEVICES + chunk - 1) // chunk) as pool:
        futures = [pool.submit(run_devices, server.mqtt_port, first, min(chunk, DEVICES - first),
                               per, release, close_at) for first in range(0, DEVICES, chunk)]
        open_now = 0
        while time.time() < close_at - 5 and open_now < DEVICES:
            open_now = int(float(dict(
                line.rsplit(" ", 1) for line in requests.get(server.url + "/metrics", timeout=10)
                .text.splitlines() if line and not line.startswith("#")
            ).get("sluice_mqtt_connections", "0")))
            time.sleep(0.5)
        open(release, "w").close()
        results = [codes for f in futures for codes in f.result()]
    elapsed = time.time() - started
    assert open_now == DEVICES, f"{open_now} MQTT connections open at once, not {DEVICES}"
    assert results == [[0] * per] * DEVICES
    rows = rows_in_delta(location, DEVICES * per, timeout=120)
    assert [r["id"] for r in rows] == list(range(DEVICES * per))
    print(f"{DEVICES} devices x {per} QoS 1 records, all open at once: {elapsed:.1f} s")


def test_sigkill_mid_run_loses_no_acked_record_and_duplicates_none(tmp_path):
    """Devices publish QoS 1 and 2 with ids of their own; the pod is SIGKILLed mid-run and
    restarted. Every acknowledged id is in Delta once; un-acknowledged ids are in it at most
    once (nothing is resent, so there is nothing to duplicate)."""
    server = MqttServer(tmp_path)
    location = create_table(server)
    acked = {}
    sent = {}
    stop = threading.Event()

    def device(n, qos):
        d = Device(server.mqtt_port, client_id=f"crash-{n}")
        d.client.reconnect_delay_set(60, 60)
        assert d.connect()[0] == 0
        mine_acked, mine_sent = [], []
        seq = 0
        while not stop.is_set():
            ids = [n * 1_000_000 + seq + k for k in range(5)]
            seq += 5
            mid = d.publish_async([{"id": i} for i in ids], qos=qos)
            mine_sent += ids
            try:
                code = d.wait_ack(mid, timeout=5)[0]
            except AssertionError:
                break
            if code == 0:
                mine_acked += ids
        d.client.loop_stop()
        acked[n], sent[n] = mine_acked, mine_sent

    threads = [threading.Thread(target=device, args=(n, 1 if n % 2 else 2)) for n in range(8)]
    for t in threads:
        t.start()
    time.sleep(3)
    server.kill()
    stop.set()
    for t in threads:
        t.join(60)
    all_acked = [i for ids in acked.values() for i in ids]
    all_sent = {i for ids in sent.values() for i in ids}
    assert len(all_acked) > 100, "the devices acked too little before the kill"
    restarted = MqttServer(tmp_path)
    try:
        rows = rows_in_delta(location, len(all_acked), timeout=60)
        ids = [r["id"] for r in rows]
        assert len(ids) == len(set(ids)), "duplicates"
        assert set(all_acked) <= set(ids), "acked records lost"
        assert set(ids) <= all_sent
        print(f"acked {len(all_acked)}, in Delta {len(ids)} (un-acked that landed: "
              f"{len(ids) - len(all_acked)})")
    finally:
        restarted.stop()


def test_tls_with_the_pods_certificate(tmp_path):
    """With --tls-cert/--tls-key the MQTT port speaks TLS with the pod's certificate; a
    plain-text client of it is closed without a byte (reset)."""
    from test_tls import make_certs
    certs = make_certs(str(tmp_path))
    (tmp_path / "pod").mkdir()
    server = MqttServer(tmp_path / "pod", tls=certs)
    try:
        location = create_table(server)
        d = Device(server.mqtt_port, tls_ca=certs["ca.pem"])
        assert d.connect()[0] == 0
        assert d.publish({"id": 7, "temp": 7.5})[0] == 0
        d.close()
        sock = socket.create_connection(("127.0.0.1", server.mqtt_port), timeout=30)
        sock.sendall(connect_packet())
        # The pod only peeked at the first byte: closing with the bytes unread is a reset.
        with pytest.raises(ConnectionResetError):
            sock.recv(4096)
        assert rows_in_delta(location, 1) == [{"id": 7, "temp": 7.5}]
    finally:
        server.stop()


def fill(directory):
    """Takes every free byte of the file system holding `directory` with one file."""
    path = os.path.join(directory, "filler")
    fd = os.open(path, os.O_CREAT | os.O_WRONLY)
    st = os.statvfs(directory)
    size = st.f_bavail * st.f_frsize
    while size > 0:
        try:
            os.posix_fallocate(fd, 0, size)
            break
        except OSError:
            size -= 4096
    os.close(fd)
    return path


def test_a_full_wal_disk_is_answered_0x97_and_the_held_publish_lands_when_space_returns(tmp_path):
    """The WAL directory is a 4 MiB tmpfs (mounting needs root, as `server/tests/it/
    disk_full.rs`; `SLUICE_SKIP_MOUNT_TESTS=1` skips it knowingly) filled by a file: the
    publish whose frame the stalled WAL writer holds is not answered yet; a publish on
    another connection meanwhile gets PUBACK 0x97 Quota exceeded naming the full disk
    (counted once as ResourceExhausted); once space returns the held publish is PUBACKed and
    every PUBACKed record is in Delta, the refused one not."""
    if os.environ.get("SLUICE_SKIP_MOUNT_TESTS"):
        pytest.skip("SLUICE_SKIP_MOUNT_TESTS is set: the tmpfs WAL test is skipped knowingly")
    data = tmp_path / "pod"
    wal = data / "wal"
    wal.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(wal)],
                             capture_output=True, text=True)
    assert mounted.returncode == 0, f"mounting a tmpfs needs root: {mounted.stderr}"
    server = None
    try:
        # No flush during the test: nothing is purged, so only the filler decides the space.
        server = MqttServer(data, extra=("--wal-segment-bytes", str(256 << 10)),
                            flush_interval="1h")
        table = "main.mqtt.full"
        location = server.api("POST", "", {"name": table, "columns": [
            COLUMNS[0], {"name": "note", "type_text": "string", "type_name": "STRING",
                         "nullable": True}]})["storage_location"]
        before = refusals(server)
        d = Device(server.mqtt_port)
        assert d.connect()[0] == 0
        assert d.publish({"id": 0}, topic=table)[0] == 0
        filler = fill(str(wal))
        acked, held = [0], None
        body = "x" * 1000
        for i in range(1, 2000):
            mid = d.publish_async({"id": i, "note": body}, qos=1, topic=table)
            deadline = time.time() + 3
            while mid not in d.acks and time.time() < deadline:
                time.sleep(0.01)
            if mid not in d.acks:
                held = (i, mid)
                break
            assert d.acks[mid][0] == 0, d.acks[mid]
            acked.append(i)
        assert held, "the WAL never stalled"
        other = Device(server.mqtt_port)
        assert other.connect()[0] == 0
        code, why = other.publish({"id": 99_999}, topic=table)
        assert code == 0x97 and "no space left" in why, (code, why)
        print("0x97 reason string:", why)
        other.close()
        os.remove(filler)
        assert d.wait_ack(held[1], timeout=30)[0] == 0, "the held publish is PUBACKed"
        acked.append(held[0])
        d.close()
        assert delta(before, refusals(server)) == {
            "ResourceExhausted": 1, "sluice_mqtt_records_total": len(acked)}
    finally:
        if server:
            server.stop()
        subprocess.run(["umount", "-l", str(wal)], check=False)
    ids = sorted(pl.from_arrow(DeltaTable(location).to_pyarrow_table())["id"].to_list())
    assert ids == acked, (len(ids), len(acked))
