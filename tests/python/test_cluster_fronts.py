"""MQTT and Kafka through `sluice router --mqtt-listen --kafka-listen` in front of three pods
joined to a real etcd: each TCP connection is placed on a pod and relayed to its listener.
Real clients (`paho-mqtt` v5 and 3.1.1, `mosquitto_pub`, `confluent-kafka` with
`enable.idempotence=true`); rows read back with `deltalake` and `polars`.

Contracts under test: MQTT publishes through the router land in Delta exactly as published;
the router's /metrics counts the relayed connections; devices whose pod is SIGKILLed
reconnect through the router and repeat only what was not PUBACKed; an idempotent Kafka
producer whose
pod is SIGKILLed mid-run reconnects through the router (the pods advertise the router in
Metadata) to another pod, which takes its producer stream over (fenced until the killed pod
is back and has committed its WAL), and every record is in Delta once: 0 duplicates, 0 loss;
the same when the serving pod is drained instead; with no pod ready the router answers an
MQTT CONNECT with CONNACK "Server unavailable" (v5 0x88, 3.1.1 return code 3) and closes a
Kafka connection without an answer. `SLUICE_FRONTS_KAFKA_RECORDS` lengthens the Kafka runs.
"""

import base64
from collections import Counter
import json
import os
import re
import signal
import socket
import struct
import subprocess
import threading
import time
import urllib.request

import paho.mqtt.client as mqtt
import polars as pl
import pytest
from confluent_kafka import Producer
from deltalake import DeltaTable

from conftest import CLIENT_ID, CLIENT_SECRET, Server, free_port, metric
from test_cluster import wait_ok
from test_kafka import send_paced
from test_mqtt import Device
from test_mqtt_sessions import PUBCOMP, PUBREC, ack, pubrel, qos2_publish, session_connect

BINARY = os.environ.get("SLUICE_BIN", "target/debug/sluice")
TABLE = "main.fronts.t"
COLUMNS = [{"name": "id", "type_text": "bigint", "type_name": "LONG", "nullable": False},
           {"name": "temp", "type_text": "double", "type_name": "DOUBLE", "nullable": True}]
KAFKA_RECORDS = int(os.environ.get("SLUICE_FRONTS_KAFKA_RECORDS", "3000"))


class Cluster:
    """etcd, a router with MQTT and Kafka front doors, and pods serving both."""

    def __init__(self, tmp_path, pods=3, drain_grace="3s"):
        self.tmp = tmp_path
        self.drain_grace = drain_grace
        client, peer = free_port(), free_port()
        self.etcd_log = open(tmp_path / "etcd.log", "wb")
        self.etcd = subprocess.Popen(
            ["etcd", "--name", "fronts", "--data-dir", str(tmp_path / "etcd"),
             "--listen-client-urls", f"http://127.0.0.1:{client}",
             "--advertise-client-urls", f"http://127.0.0.1:{client}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"fronts=http://127.0.0.1:{peer}"],
            stdout=self.etcd_log, stderr=subprocess.STDOUT)
        wait_ok(f"http://127.0.0.1:{client}/health", "etcd")
        self.join = f"etcd://127.0.0.1:{client}"
        self.key_file = tmp_path / "secrets.key"
        self.key_file.write_text(base64.b64encode(os.urandom(32)).decode())
        self.key_file.chmod(0o600)
        self.http_port, self.mqtt_port, self.kafka_port = free_port(), free_port(), free_port()
        self.router_log = open(tmp_path / "router.log", "wb")
        self.router = subprocess.Popen(
            [BINARY, "router", "--listen", f"127.0.0.1:{self.http_port}", "--join", self.join,
             "--mqtt-listen", f"127.0.0.1:{self.mqtt_port}",
             "--kafka-listen", f"127.0.0.1:{self.kafka_port}", "--placement", "least-loaded"],
            stdout=self.router_log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.http_port}"
        wait_ok(self.url + "/healthz", "sluice router")
        self.pods = {}
        for i in range(pods):
            self.start_pod(f"pod-{i}")
        self.wait_placeable(pods)

    def start_pod(self, pod_id):
        d = self.tmp / pod_id
        d.mkdir(exist_ok=True)
        # Commits every 5 s: a producer that moves finds rows only the old pod's WAL holds.
        pod = Server(d, flush_interval="5s", extra=["--join", self.join, "--pod-id", pod_id,
                               "--warehouse", str(self.tmp / "warehouse"),
                               "--secrets-key-file", str(self.key_file),
                               "--mqtt-listen", "127.0.0.1:0",
                               "--kafka-listen", "127.0.0.1:0",
                               "--kafka-advertise", f"127.0.0.1:{self.kafka_port}",
                               "--drain-grace", self.drain_grace])
        self.pods[pod_id] = pod
        return pod

    def metrics(self, url=None):
        with urllib.request.urlopen((url or self.url) + "/metrics", timeout=5) as r:
            return r.read().decode()

    def wait_placeable(self, n, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = re.search(r"^sluice_router_pods_placeable (\S+)", self.metrics(), re.M)
            if m and float(m.group(1)) == n:
                return
            time.sleep(0.1)
        raise AssertionError(f"the router never counted {n} placeable pods")

    def kafka_records(self):
        """Each live pod's `sluice_kafka_records_total`."""
        out = {}
        for pod_id, pod in self.pods.items():
            if pod.proc.poll() is not None:
                continue
            try:
                m = re.search(r"^sluice_kafka_records_total (\S+)", self.metrics(pod.url), re.M)
            except OSError:
                continue
            out[pod_id] = float(m.group(1)) if m else 0.0
        return out

    def serving_kafka(self, timeout=60):
        """The pod whose Kafka record count is growing."""
        deadline = time.time() + timeout
        before = self.kafka_records()
        while time.time() < deadline:
            time.sleep(0.3)
            now = self.kafka_records()
            grew = [p for p, n in now.items() if n > before.get(p, 0.0)]
            if len(grew) == 1:
                return grew[0]
            before = now
        raise AssertionError("no single pod is taking the Kafka records")

    def stop(self):
        for pod in self.pods.values():
            pod.stop()
        for proc in (self.router, self.etcd):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
        self.router_log.close()
        self.etcd_log.close()


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.stop()


def create_table(cluster):
    """Creates the table through one pod and waits until every pod sees it."""
    pod = next(iter(cluster.pods.values()))
    location = pod.api("POST", "", {"name": TABLE, "columns": COLUMNS})["storage_location"]
    for other in cluster.pods.values():
        deadline = time.time() + 30
        while True:
            try:
                other.api("GET", "/" + TABLE)
                break
            except OSError:
                assert time.time() < deadline, "the table never reached every pod"
                time.sleep(0.1)
    return location


def delta_ids(location):
    return pl.from_arrow(DeltaTable(location).to_pyarrow_table()).sort("id")["id"].to_list()


def test_mqtt_devices_and_mosquitto_pub_through_the_router_land_exactly(cluster):
    location = create_table(cluster)
    expected = []
    devices = []
    for n in range(6):
        version = mqtt.MQTTv5 if n % 2 == 0 else mqtt.MQTTv311
        d = Device(cluster.mqtt_port, version=version, client_id=f"dev-{n}")
        assert d.connect()[0] == 0
        devices.append(d)
    for k in range(20):
        for n, d in enumerate(devices):
            i = n * 1000 + k
            ack = d.publish({"id": i, "temp": k / 4}, qos=1 + (k % 2), topic=TABLE)
            assert ack[0] == 0, ack
            expected.append(i)
    for d in devices:
        d.close()
    for n, version in enumerate(["mqttv5", "mqttv311"]):
        i = 9000 + n
        out = subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(cluster.mqtt_port),
                              "-t", TABLE, "-d", "-V", version, "-q", "1", "-u", CLIENT_ID,
                              "-P", CLIENT_SECRET, "-m", json.dumps({"id": i, "temp": 1.5})],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and "received PUBACK" in out.stdout, out.stdout + out.stderr
        expected.append(i)
    relayed = metric(cluster.metrics(), "sluice_router_tcp_connections_total", protocol="mqtt")
    assert relayed == 8, relayed
    served = [p for p in cluster.pods.values()
              if metric(cluster.metrics(p.url), "sluice_mqtt_records_total") > 0]
    assert len(served) >= 2, "the connections were spread over the pods"
    for pod in cluster.pods.values():
        pod.stop()  # drains: memtables committed
    df = pl.from_arrow(DeltaTable(location).to_pyarrow_table()).sort("id")
    assert df["id"].to_list() == sorted(expected)
    assert df.filter(pl.col("id") == 5019)["temp"].to_list() == [19 / 4]


def test_mqtt_devices_through_the_router_while_a_pod_is_sigkilled(cluster):
    """Devices publish QoS 1 batches of their own ids through the router; the pod serving
    most of them is SIGKILLed (restarted 2 s later). A device whose batch got no PUBACK
    reconnects through the router (to another pod) and publishes that batch again. Every
    PUBACKed id is in Delta; an id is there twice only if it was resent after no PUBACK."""
    location = create_table(cluster)
    acked, resent = [], []
    lock = threading.Lock()
    stop = threading.Event()

    def device(n):
        d, seq, pending = None, 0, None
        while not stop.is_set():
            if d is None:
                d = Device(cluster.mqtt_port, client_id=f"dev-{n}")
                d.client.reconnect_delay_set(60, 60)
                try:
                    if d.connect(timeout=10)[0] != 0:
                        raise AssertionError("refused")
                except (AssertionError, OSError):
                    d.client.loop_stop()
                    d = None
                    time.sleep(0.2)
                    continue
            if pending is None:
                pending = [n * 1_000_000 + seq + k for k in range(5)]
                seq += 5
            mid = d.publish_async([{"id": i} for i in pending], qos=1, topic=TABLE)
            try:
                code = d.wait_ack(mid, timeout=5)[0]
            except AssertionError:
                code = None
            if code == 0:
                with lock:
                    acked.extend(pending)
                pending = None
            else:  # no PUBACK: the batch is resent on a new connection
                with lock:
                    resent.extend(pending)
                d.client.loop_stop()
                d = None
        if d is not None:
            d.close()

    threads = [threading.Thread(target=device, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    time.sleep(3)
    counts = {pid: metric(cluster.metrics(p.url), "sluice_mqtt_connections")
              for pid, p in cluster.pods.items()}
    victim = max(counts, key=counts.get)
    assert counts[victim] >= 1, counts
    pod = cluster.pods[victim]
    pod.proc.kill()
    pod.proc.wait()
    pod.log.close()
    time.sleep(2)
    cluster.start_pod(victim)
    time.sleep(3)
    stop.set()
    for t in threads:
        t.join(60)
    assert resent, "the kill cut some device's batch before its PUBACK"
    for p in cluster.pods.values():
        p.stop()
    seen = Counter(delta_ids(location))
    twice = {i for i, n in seen.items() if n > 1}
    assert set(acked) <= set(seen), "PUBACKed ids lost"
    assert twice <= set(resent), "only un-PUBACKed ids repeat"
    assert all(seen[i] == 2 for i in twice), "a resent id is there at most twice"
    print(f"killed {victim} ({counts}); acked {len(acked)} ids, resent {len(resent)}, "
          f"{len(twice)} in Delta twice")


def idempotent_run(cluster, location, disrupt):
    """An idempotent producer through the router; `disrupt(pod_id)` is called on the pod
    serving it, twice, while records are in flight. Returns the delivery errors."""
    producer = Producer({
        "bootstrap.servers": f"127.0.0.1:{cluster.kafka_port}",
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
        "sasl.username": CLIENT_ID, "sasl.password": CLIENT_SECRET,
        "enable.idempotence": True, "linger.ms": 5, "compression.type": "lz4",
        "message.timeout.ms": 240000, "retry.backoff.ms": 100,
        "reconnect.backoff.max.ms": 500})
    # Metadata (answered by a pod through the router) names the router as the only broker.
    brokers = producer.list_topics(TABLE, timeout=30).brokers
    assert [f"{b.host}:{b.port}" for b in brokers.values()] == \
        [f"127.0.0.1:{cluster.kafka_port}"], brokers
    start = time.time()
    # Spread over 16 s; disruptions at 4 s and 10 s.
    errors, done = send_paced(producer, TABLE, KAFKA_RECORDS, 16.0,
                              lambda i: {"id": i, "temp": 0.5})
    for at in (4.0, 10.0):
        time.sleep(max(0.0, start + at - time.time()))
        assert 0 < len(errors) < KAFKA_RECORDS and not done.is_set(), \
            ("the disruption lands while records are in flight", len(errors))
        disrupt(cluster.serving_kafka())
    assert done.wait(300), "the producer flushed"
    return errors


def test_idempotent_kafka_producer_through_the_router_while_its_pod_is_sigkilled(cluster):
    location = create_table(cluster)
    moves = []

    def kill_and_restart(pod_id):
        pod = cluster.pods[pod_id]
        pod.proc.kill()
        pod.proc.wait()
        pod.log.close()
        moves.append(pod_id)
        # Back after a while, like a StatefulSet pod: until then its producer stream is
        # fenced on the other pods (their answers are retried by the client).
        time.sleep(2)
        cluster.start_pod(pod_id)

    errors = idempotent_run(cluster, location, kill_and_restart)
    assert len(errors) == KAFKA_RECORDS and all(e is None for e in errors), \
        [e for e in errors if e is not None][:3]
    assert metric(cluster.metrics(), "sluice_router_tcp_connections_total", protocol="kafka") >= 3
    for pod in cluster.pods.values():
        pod.stop()
    ids = delta_ids(location)
    dups, lost = len(ids) - len(set(ids)), KAFKA_RECORDS - len(set(ids))
    print(f"killed {moves}; {len(ids)} rows, {dups} duplicates, {lost} lost")
    assert (dups, lost) == (0, 0)
    assert ids == list(range(KAFKA_RECORDS))


def test_idempotent_kafka_producer_through_the_router_while_its_pod_is_drained(cluster):
    location = create_table(cluster)
    drained = []

    def drain(pod_id):
        out = subprocess.run([BINARY, "pod", "drain", pod_id, "--join", cluster.join],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        cluster.pods[pod_id].proc.wait(timeout=60)
        drained.append(pod_id)

    errors = idempotent_run(cluster, location, drain)
    assert len(errors) == KAFKA_RECORDS and all(e is None for e in errors), \
        [e for e in errors if e is not None][:3]
    assert len(set(drained)) == 2
    for pod in cluster.pods.values():
        pod.stop()
    ids = delta_ids(location)
    assert len(ids) - len(set(ids)) == 0, "duplicates"
    assert ids == list(range(KAFKA_RECORDS))


def test_a_device_finds_its_session_through_the_router_until_its_pod_is_gone(cluster):
    """Six devices (v5 and 3.1.1, clean start 0, session expiry 600 s) through the router:
    each publishes QoS 2 and leaves before PUBREL; on reconnecting through the router it
    lands on the same pod (placed by its client id), which answers session present 1, takes
    the resent PUBLISH without writing it again and completes the PUBREL. Then the pod
    holding some of the sessions is SIGKILLed: those devices land on another pod and get
    session present 0 (their sessions died with the pod), the others still find theirs."""
    location = create_table(cluster)
    port = cluster.mqtt_port
    ids = [(f"sticky-{n}".encode(), 5 if n % 2 == 0 else 4) for n in range(6)]
    for n, (cid, version) in enumerate(ids):
        sock, present, code = session_connect(port, cid, version, expiry=600)
        assert (present, code) == (0, 0)
        sock.sendall(qos2_publish(1, json.dumps({"id": n}).encode(), version, topic=TABLE))
        assert ack(sock) == (PUBREC, 1, 0)
        sock.close()
    for n, (cid, version) in enumerate(ids):
        sock, present, code = session_connect(port, cid, version, expiry=600)
        assert (present, code) == (1, 0), cid
        sock.sendall(qos2_publish(1, json.dumps({"id": n}).encode(), version, dup=True,
                                  topic=TABLE))
        assert ack(sock) == (PUBREC, 1, 0)
        sock.sendall(qos2_publish(2, json.dumps({"id": 10 + n}).encode(), version,
                                  topic=TABLE))
        assert ack(sock) == (PUBREC, 2, 0)
        sock.sendall(pubrel(1))
        assert ack(sock) == (PUBCOMP, 1, 0)
        sock.close()
    held = {pid: metric(cluster.metrics(p.url), "sluice_mqtt_sessions_total", outcome="new")
            for pid, p in cluster.pods.items()}
    assert sum(held.values()) == 6 and sum(1 for v in held.values() if v) >= 2, held
    victim = max(held, key=held.get)
    time.sleep(6)  # the pods commit every 5 s: PUBRECed rows are in Delta before the kill
    pod = cluster.pods.pop(victim)
    pod.proc.kill()
    pod.proc.wait()
    pod.log.close()
    lost = 0
    for n, (cid, version) in enumerate(ids):
        sock, present, code = session_connect(port, cid, version, expiry=600)
        assert code == 0
        lost += present == 0
        # Id 2 was PUBRECed: its PUBREL completes where the session is, else 0x92 (v5).
        sock.sendall(pubrel(2))
        assert ack(sock) == (PUBCOMP, 2, 0 if present or version == 4 else 0x92)
        sock.close()
    print(f"sessions per pod {held}; killed {victim}: {lost} sessions lost")
    assert lost == held[victim], (lost, held)
    for p in cluster.pods.values():
        p.stop()
    assert delta_ids(location) == list(range(6)) + list(range(10, 16))


def test_a_drained_pod_sends_its_mqtt_devices_to_another_pod_without_waiting_the_grace(
        tmp_path):
    """Six paho devices (3 v5, 3 3.1.1) through the router; the pod holding most of them is
    drained (`sluice pod drain`, grace 20 s). Its v5 devices get DISCONNECT 0x9C Use another
    server and its 3.1.1 devices are closed, after their PUBACKs; paho reconnects through
    the router to the other pods and publishes on. The pod is gone well before the grace:
    the drain waits for producers' streams and connections, not for the pod's own REST
    streams (which MQTT publishes write through)."""
    cluster = Cluster(tmp_path, drain_grace="20s")
    try:
        location = create_table(cluster)
        devices = []
        for n in range(6):
            version = mqtt.MQTTv5 if n % 2 == 0 else mqtt.MQTTv311
            d = Device(cluster.mqtt_port, version=version, client_id=f"drain-{n}")
            assert d.connect()[0] == 0
            d.client.reconnect_delay_set(1, 1)
            devices.append(d)
        for n, d in enumerate(devices):
            assert d.publish({"id": n}, qos=1, topic=TABLE)[0] == 0
        counts = {pid: metric(cluster.metrics(p.url), "sluice_mqtt_connections")
                  for pid, p in cluster.pods.items()}
        victim = max(counts, key=counts.get)
        assert counts[victim] >= 1, counts
        started = time.time()
        out = subprocess.run([BINARY, "pod", "drain", victim, "--join", cluster.join],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        cluster.pods[victim].proc.wait(timeout=60)
        gone_after = time.time() - started
        log = (cluster.tmp / victim / "server.log").read_text(errors="replace")
        moved = re.findall(r"streams moved away.*", log)
        print(f"drained {victim} ({counts}) in {gone_after:.1f} s; {moved}")
        moved_off = [d for d in devices if d.disconnected.is_set()]
        assert len(moved_off) == counts[victim], (len(moved_off), counts)
        for d in moved_off:
            if d.version == mqtt.MQTTv5:
                assert d.disconnect_reason[0] == 0x9C, d.disconnect_reason
        assert any(d.version == mqtt.MQTTv5 for d in moved_off), "a v5 device was told"
        assert gone_after < 10, f"the drain waited the grace: {gone_after:.1f} s"
        # paho reconnects through the router, to another pod, and publishes on.
        deadline = time.time() + 30
        while not all(d.client.is_connected() for d in devices):
            assert time.time() < deadline, "a device did not reconnect"
            time.sleep(0.1)
        for d in moved_off:
            d.disconnected.clear()
        for n, d in enumerate(devices):
            assert d.publish({"id": 100 + n}, qos=1, topic=TABLE)[0] == 0
        alive = [p for pid, p in cluster.pods.items() if pid != victim]
        assert sum(metric(cluster.metrics(p.url), "sluice_mqtt_connections")
                   for p in alive) == 6
        for d in devices:
            d.close()
        for p in alive:
            p.stop()
        assert delta_ids(location) == list(range(6)) + list(range(100, 106))
    finally:
        cluster.stop()


def test_no_ready_pod_mqtt_gets_server_unavailable_and_kafka_is_closed(tmp_path):
    cluster = Cluster(tmp_path, pods=0)
    try:
        # paho: MQTT 5 reason code 0x88 (136) and 3.1.1 return code 3.
        v5 = Device(cluster.mqtt_port, version=mqtt.MQTTv5)
        assert v5.connect()[0] == 0x88
        v5.close()
        v311 = Device(cluster.mqtt_port, version=mqtt.MQTTv311)
        assert v311.connect()[0] == 0x88  # paho's name for return code 3
        v311.close()
        # On the wire: 3.1.1 return code 3; MQTT 5 reason code 0x88, no properties.
        for level, answer in [(4, b"\x20\x02\x00\x03"), (5, b"\x20\x03\x00\x88\x00")]:
            body = b"\x00\x04MQTT" + bytes([level, 0x02, 0, 30])
            body += b"\x00" if level == 5 else b""
            body += b"\x00\x03raw"
            with socket.create_connection(("127.0.0.1", cluster.mqtt_port), timeout=10) as s:
                s.sendall(bytes([0x10, len(body)]) + body)
                got = b""
                while chunk := s.recv(64):
                    got += chunk
                assert got == answer, got
        out = subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(cluster.mqtt_port),
                              "-t", TABLE, "-d", "-V", "mqttv5", "-q", "1", "-m", "{}"],
                             capture_output=True, text=True, timeout=60)
        assert "received CONNACK (136)" in out.stdout, out.stdout + out.stderr
        # Not a CONNECT: closed without an answer.
        with socket.create_connection(("127.0.0.1", cluster.mqtt_port), timeout=10) as s:
            s.sendall(b"GET / HTTP/1.1\r\n\r\n")
            assert s.recv(64) == b""
        # Kafka: an ApiVersions request is not answered; the connection is closed.
        with socket.create_connection(("127.0.0.1", cluster.kafka_port), timeout=10) as s:
            body = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
            s.sendall(struct.pack(">i", len(body)) + body)
            assert s.recv(64) == b""
        m = cluster.metrics()
        assert metric(m, "sluice_router_tcp_no_pod_total", protocol="mqtt") == 6
        assert metric(m, "sluice_router_tcp_no_pod_total", protocol="kafka") == 1
        assert metric(m, "sluice_router_tcp_connections_total") == 0
    finally:
        cluster.stop()
