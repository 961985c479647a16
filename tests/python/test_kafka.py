"""The Kafka producer protocol (`sluice serve --kafka-listen`) against real Kafka clients:
`confluent-kafka` (librdkafka), `kafka-python` and `kcat`; rows read back with Python
`deltalake` and `polars`.

Contracts under test: SASL PLAIN (client id / secret) and OAUTHBEARER (a Sluice token),
bad credentials failing with the SASL error; every compression codec; a delivered record
is in Delta exactly once; the opt-in `_kafka_*` columns; refusals (unknown topic, a value
that is not JSON while another producer keeps flowing, an oversize record); an idempotent
producer (`enable.idempotence=true`) while the pod is SIGKILLed and restarted: 0 duplicates,
0 loss. `SLUICE_KAFKA_KILL_RECORDS` / `SLUICE_KAFKA_KILLS` lengthen that run.
"""

import json
import os
import shutil
import socket
import struct
import subprocess
import threading
import time

import polars as pl
import pytest
from confluent_kafka import KafkaError, Producer
from deltalake import DeltaTable

from conftest import CLIENT_ID, CLIENT_SECRET, Server, create_table, free_port

TABLE = "main.kafka.t"
COLUMNS = [("id", "bigint", "LONG", False), ("src", "string", "STRING", True),
           ("temp", "double", "DOUBLE", True)]


def kafka_server(tmp_path, kport, extra=(), tls=None):
    return Server(tmp_path, extra=("--kafka-listen", f"127.0.0.1:{kport}", *extra), tls=tls)


def plain_config(kport, **more):
    return {"bootstrap.servers": f"127.0.0.1:{kport}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN", "sasl.username": CLIENT_ID,
            "sasl.password": CLIENT_SECRET, **more}


def produce_all(producer, topic, rows, timeout=60):
    """Produces `rows` (dicts) and returns the delivery errors (None for each success)."""
    results = []
    for row in rows:
        while True:
            try:
                producer.produce(topic, json.dumps(row).encode(),
                                 on_delivery=lambda err, msg: results.append(err))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(timeout) == 0, "every record answered"
    return results


def send_paced(producer, topic, records, pace, row_of):
    """Produces `row_of(i)` for i < `records` spread over `pace` seconds on a thread, then
    flushes; returns the delivery errors (appended as answered) and an event set when
    flushed."""
    errors = []
    done = threading.Event()

    def send():
        start = time.time()
        for i in range(records):
            while True:
                try:
                    producer.produce(topic, json.dumps(row_of(i)).encode(),
                                     on_delivery=lambda err, msg: errors.append(err))
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            ahead = start + i * pace / records - time.time()
            if ahead > 0:
                time.sleep(ahead)
        producer.flush(240)
        done.set()

    threading.Thread(target=send, daemon=True).start()
    return errors, done


def rows_in_delta(location):
    return pl.from_arrow(DeltaTable(location).to_pyarrow_table()).sort("id")


def test_every_codec_with_plain_oauthbearer_kafka_python_and_kcat(tmp_path):
    kport = free_port()
    server = kafka_server(tmp_path, kport)
    try:
        location = server.api("POST", "", {"name": TABLE, "columns": [
            {"name": n, "type_text": t, "type_name": tn, "nullable": nl}
            for n, t, tn, nl in COLUMNS]})["storage_location"]
        expected = []
        for n, codec in enumerate(["none", "gzip", "snappy", "lz4", "zstd"]):
            producer = Producer(plain_config(kport, **{"compression.type": codec,
                                                       "enable.idempotence": n % 2 == 0,
                                                       "linger.ms": 5}))
            rows = [{"id": n * 1000 + i, "src": codec, "temp": i / 2} for i in range(300)]
            assert produce_all(producer, TABLE, rows) == [None] * len(rows)
            expected += [r["id"] for r in rows]

        token = server.token()
        bearer = Producer({"bootstrap.servers": f"127.0.0.1:{kport}",
                           "security.protocol": "SASL_PLAINTEXT",
                           "sasl.mechanisms": "OAUTHBEARER",
                           "oauth_cb": lambda _config: (token, time.time() + 3600),
                           "compression.type": "lz4"})
        rows = [{"id": 9000 + i, "src": "oauthbearer"} for i in range(50)]
        assert produce_all(bearer, TABLE, rows) == [None] * len(rows)
        expected += [r["id"] for r in rows]

        from kafka import KafkaProducer

        kp = KafkaProducer(bootstrap_servers=f"127.0.0.1:{kport}", security_protocol="SASL_PLAINTEXT",
                           sasl_mechanism="PLAIN", sasl_plain_username=CLIENT_ID,
                           sasl_plain_password=CLIENT_SECRET, compression_type="gzip")
        futures = [kp.send(TABLE, json.dumps({"id": 9500 + i, "src": "kafka-python"}).encode())
                   for i in range(20)]
        for f in futures:
            f.get(timeout=30)
        kp.close()
        expected += [9500 + i for i in range(20)]

        kcat = shutil.which("kcat")
        assert kcat, "kcat is installed by scripts/test.sh"
        lines = "".join(json.dumps({"id": 9800 + i, "src": "kcat"}) + "\n" for i in range(10))
        run = subprocess.run([kcat, "-P", "-b", f"127.0.0.1:{kport}", "-t", TABLE, "-z", "zstd",
                              "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
                              "-X", f"sasl.username={CLIENT_ID}", "-X", f"sasl.password={CLIENT_SECRET}"],
                             input=lines.encode(), capture_output=True, timeout=60)
        assert run.returncode == 0, run.stderr
        expected += [9800 + i for i in range(10)]
    finally:
        server.stop()
    df = rows_in_delta(location)
    assert df["id"].to_list() == sorted(expected)
    assert df.filter(pl.col("id") == 3007)["src"].to_list() == ["lz4"]
    assert df.filter(pl.col("id") == 1004)["temp"].to_list() == [2.0]


def test_kafka_columns_keep_key_headers_and_timestamp(tmp_path):
    kport = free_port()
    server = kafka_server(tmp_path, kport)
    try:
        create_table(server, "main.kafka.cols", [
            ("id", "bigint", "LONG", False),
            ("_kafka_key", "binary", "BINARY", True),
            ("_kafka_headers", "map<string,binary>", "MAP", True),
            ("_kafka_timestamp", "timestamp", "TIMESTAMP", True)])
        location = server.api("GET", "/main.kafka.cols")["storage_location"]
        producer = Producer(plain_config(kport))
        errors = []
        producer.produce("main.kafka.cols", b'{"id": 1, "_kafka_key": "Zm9yZ2Vk"}', key=b"\x00k1",
                         headers=[("trace", b"abc"), ("empty", None)], timestamp=1_700_000_000_123,
                         on_delivery=lambda err, msg: errors.append(err))
        producer.produce("main.kafka.cols", b'{"id": 2}', timestamp=1_700_000_000_456,
                         on_delivery=lambda err, msg: errors.append(err))
        assert producer.flush(30) == 0
        assert errors == [None, None]
    finally:
        server.stop()
    rows = rows_in_delta(location).to_dicts()
    assert rows[0]["_kafka_key"] == b"\x00k1"
    headers = rows[0]["_kafka_headers"]
    headers = dict(headers.items()) if isinstance(headers, dict) else {e["key"]: e["value"] for e in headers}
    assert headers == {"trace": b"abc", "empty": None}
    assert int(rows[0]["_kafka_timestamp"].timestamp() * 1000) == 1_700_000_000_123
    assert rows[1]["_kafka_key"] is None
    assert int(rows[1]["_kafka_timestamp"].timestamp() * 1000) == 1_700_000_000_456


def test_refusals_and_other_producers_keep_flowing(tmp_path):
    kport = free_port()
    server = kafka_server(tmp_path, kport, extra=("--max-record-bytes", "65536"))
    try:
        create_table(server, TABLE, COLUMNS)
        location = server.api("GET", "/" + TABLE)["storage_location"]

        # Bad credentials: the SASL error reaches the client's error callback.
        for config, expected in (
                (plain_config(kport, **{"sasl.password": "wrong-secret"}),
                 "Plain: invalid client id or secret"),
                ({"bootstrap.servers": f"127.0.0.1:{kport}",
                  "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER",
                  "oauth_cb": lambda _c: ("not-a-token", time.time() + 3600)},
                 "OAuthBearer: malformed access token")):
            seen = []
            bad = Producer({**config, "error_cb": seen.append, "message.timeout.ms": 3000})
            errors = produce_all(bad, TABLE, [{"id": -1}], timeout=20)
            assert errors[0] is not None
            auth = [e for e in seen if e.code() == KafkaError._AUTHENTICATION]
            assert auth, seen
            assert "SASL authentication error" in auth[0].str(), auth[0].str()
            assert expected in auth[0].str(), auth[0].str()

        # A good producer keeps flowing while the refused ones are sent.
        stop = threading.Event()
        flowing = []

        def keep_flowing():
            good = Producer(plain_config(kport, **{"linger.ms": 5}))
            i = 0
            while not stop.is_set():
                flowing.extend(produce_all(good, TABLE, [{"id": 100_000 + i}]))
                i += 1

        thread = threading.Thread(target=keep_flowing)
        thread.start()
        try:
            plain = Producer(plain_config(kport))
            unknown = []
            plain.produce("main.kafka.nope", b'{"id": 1}', on_delivery=lambda e, m: unknown.append(e))
            plain.flush(30)
            assert unknown[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC), unknown

            invalid = []
            plain.produce(TABLE, b"not json", on_delivery=lambda e, m: invalid.append(e))
            plain.produce(TABLE, b'{"id": "x"}', on_delivery=lambda e, m: invalid.append(e))
            plain.flush(30)
            assert [e.code() for e in invalid] == [KafkaError.INVALID_RECORD] * 2, invalid

            big = []
            plain.produce(TABLE, json.dumps({"id": 5, "src": "x" * 70_000}).encode(),
                          on_delivery=lambda e, m: big.append(e))
            plain.flush(30)
            assert big[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, big
            time.sleep(0.5)
        finally:
            stop.set()
            thread.join(60)
        assert flowing and all(e is None for e in flowing), flowing[:3]
    finally:
        server.stop()
    ids = rows_in_delta(location)["id"].to_list()
    assert ids == [100_000 + i for i in range(len(flowing))], "only the good producer's rows, once"


def test_idempotent_producer_while_the_pod_is_sigkilled(tmp_path):
    records = int(os.environ.get("SLUICE_KAFKA_KILL_RECORDS", "3000"))
    kills = int(os.environ.get("SLUICE_KAFKA_KILLS", "2"))
    pace = 2.5 * (kills + 1)
    kport = free_port()
    server = kafka_server(tmp_path, kport)
    create_table(server, TABLE, COLUMNS)
    location = server.api("GET", "/" + TABLE)["storage_location"]
    producer = Producer(plain_config(kport, **{
        "enable.idempotence": True, "linger.ms": 5, "compression.type": "lz4",
        "message.timeout.ms": 240000, "retry.backoff.ms": 100,
        "reconnect.backoff.max.ms": 500}))
    # Paced over 2.5 s per kill and one more, so every kill lands mid-run.
    errors, done = send_paced(producer, TABLE, records, pace, lambda i: {"id": i, "src": "idem"})
    try:
        for k in range(1, kills + 1):
            # Each kill lands mid-run: after a share of the records was answered.
            deadline = time.time() + 120
            while len(errors) < k * records // (kills + 1) and time.time() < deadline:
                time.sleep(0.01)
            assert not done.is_set(), "the kill lands while records are still in flight"
            server.proc.kill()
            server.proc.wait()
            server.log.close()
            server = kafka_server(tmp_path, kport)
        assert done.wait(300), "the producer flushed"
    finally:
        server.stop()
    assert len(errors) == records and all(e is None for e in errors), \
        [e for e in errors if e is not None][:3]
    ids = rows_in_delta(location)["id"].to_list()
    assert len(ids) == records, f"{len(ids) - len(set(ids))} duplicates, {records - len(set(ids))} lost"
    assert ids == list(range(records))


def test_sasl_ssl_with_the_pods_certificate_and_a_plain_text_client_closed(tmp_path):
    """With --tls-cert/--tls-key the Kafka port speaks TLS with the pod's certificate (as the
    MQTT port does): confluent-kafka and kcat produce over `SASL_SSL` trusting the test CA;
    a plain-text client of the TLS port is closed without a byte (a reset; librdkafka reports
    a transport error in its error callback)."""
    from test_tls import make_certs
    certs = make_certs(str(tmp_path))
    (tmp_path / "pod").mkdir()
    kport = free_port()
    server = kafka_server(tmp_path / "pod", kport, tls=certs)
    try:
        create_table(server, TABLE, COLUMNS)
        location = server.api("GET", "/" + TABLE)["storage_location"]
        ssl_config = plain_config(kport, **{"security.protocol": "SASL_SSL",
                                            "ssl.ca.location": certs["ca.pem"],
                                            "compression.type": "lz4"})
        rows = [{"id": i, "src": "sasl_ssl"} for i in range(100)]
        assert produce_all(Producer(ssl_config), TABLE, rows) == [None] * len(rows)

        kcat = shutil.which("kcat")
        assert kcat, "kcat is installed by scripts/test.sh"
        lines = "".join(json.dumps({"id": 200 + i, "src": "kcat"}) + "\n" for i in range(10))
        run = subprocess.run([kcat, "-P", "-b", f"127.0.0.1:{kport}", "-t", TABLE,
                              "-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={certs['ca.pem']}",
                              "-X", "sasl.mechanisms=PLAIN", "-X", f"sasl.username={CLIENT_ID}",
                              "-X", f"sasl.password={CLIENT_SECRET}"],
                             input=lines.encode(), capture_output=True, timeout=60)
        assert run.returncode == 0, run.stderr

        # Plain text on the TLS port: an ApiVersions request is closed without an answer.
        client_id = b"raw"
        request = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
        sock = socket.create_connection(("127.0.0.1", kport), timeout=30)
        sock.sendall(struct.pack(">i", len(request)) + request)
        # The pod only peeked at the first byte: closing with the bytes unread is a reset.
        with pytest.raises(ConnectionResetError):
            sock.recv(4096)
        seen = []
        plain = Producer({**plain_config(kport), "error_cb": seen.append,
                          "message.timeout.ms": 3000})
        errors = produce_all(plain, TABLE, [{"id": -1}], timeout=20)
        assert errors[0] is not None
        transport = [e for e in seen if e.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)]
        assert transport, seen
        print("plain-text producer on the TLS port:", [e.str() for e in seen][:2])
    finally:
        server.stop()
    assert rows_in_delta(location)["id"].to_list() == list(range(100)) + [200 + i for i in range(10)]
