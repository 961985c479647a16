"""The official Python Zerobus SDK (1.10.0) pointed at `sluice router` (gRPC, token endpoint
and tables API all through it) in front of two pods joined to a real etcd; read back with
Python `deltalake` and `polars`.

Contract under test: the Python SDK works against the router unchanged, and every record it
saw acknowledged is in the Delta table exactly once after the pods are drained (SIGTERM).
"""

import base64
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request

import polars as pl
import pytest
from deltalake import DeltaTable
from zerobus import TableProperties, ZerobusSdk
from zerobus.sdk.shared import RecordType, StreamConfigurationOptions

from conftest import CLIENT_ID, CLIENT_SECRET, Server, free_port

BINARY = os.environ.get("SLUICE_BIN", "target/debug/sluice")


def wait_ok(url, what, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not answer {url}")


@pytest.fixture
def cluster(tmp_path):
    if shutil.which("etcd") is None:
        pytest.fail("etcd is not installed (scripts/test.sh installs Debian etcd-server)")
    client, peer = free_port(), free_port()
    etcd_log = open(tmp_path / "etcd.log", "wb")
    etcd = subprocess.Popen(
        ["etcd", "--name", "py", "--data-dir", str(tmp_path / "etcd"),
         "--listen-client-urls", f"http://127.0.0.1:{client}",
         "--advertise-client-urls", f"http://127.0.0.1:{client}",
         "--listen-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-cluster", f"py=http://127.0.0.1:{peer}"],
        stdout=etcd_log, stderr=subprocess.STDOUT)
    wait_ok(f"http://127.0.0.1:{client}/health", "etcd")
    join = f"etcd://127.0.0.1:{client}"
    # Pods of one cluster share the key-encryption key that seals the signing keys in etcd.
    key_file = tmp_path / "secrets.key"
    key_file.write_text(base64.b64encode(os.urandom(32)).decode())
    key_file.chmod(0o600)
    pods = []
    for i in range(2):
        d = tmp_path / f"pod-{i}"
        d.mkdir()
        pods.append(Server(d, extra=["--join", join, "--pod-id", f"pod-{i}",
                                     "--warehouse", str(tmp_path / "warehouse"),
                                     "--secrets-key-file", str(key_file)]))
    port = free_port()
    router_log = open(tmp_path / "router.log", "wb")
    router = subprocess.Popen([BINARY, "router", "--listen", f"127.0.0.1:{port}", "--join", join],
                              stdout=router_log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_ok(url + "/readyz", "sluice router")
    try:
        yield url, pods
    finally:
        for pod in pods:
            pod.stop()
        for proc in (router, etcd):
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        router_log.close()
        etcd_log.close()


def through(url, method, path, body=None, token=None):
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    req = urllib.request.Request(url + path, data=data, method=method, headers=headers)
    with urllib.request.urlopen(req) as r:
        return json.load(r)


def test_the_python_sdk_writes_through_the_router_and_every_acked_record_lands_once(cluster):
    url, pods = cluster
    token = pods[0].token()
    columns = [{"name": "id", "type_text": "bigint", "type_name": "LONG", "nullable": False},
               {"name": "device", "type_text": "string", "type_name": "STRING", "nullable": True}]
    created = through(url, "POST", "/api/2.1/unity-catalog/tables",
                      {"name": "main.py.routed", "columns": columns}, token)
    location = created["storage_location"]
    sdk = ZerobusSdk(url, url)
    sdk._inner.set_use_tls(False)
    options = StreamConfigurationOptions(record_type=RecordType.JSON)
    n = 3000
    streams = [sdk.create_stream(CLIENT_ID, CLIENT_SECRET, TableProperties("main.py.routed"), options)
               for _ in range(4)]
    for i in range(n):
        streams[i % 4].ingest_record_offset(json.dumps({"id": i, "device": f"d{i % 4}"}))
    for s in streams:
        s.flush()
        s.close()
    for pod in pods:
        pod.stop()  # SIGTERM drains the pod: memtables committed, WAL emptied
        assert not [f for f in os.listdir(os.path.join(pod.data_dir, "wal")) if f != "LOCK"]
    df = pl.from_arrow(DeltaTable(location).to_pyarrow_table()).sort("id")
    assert df["id"].to_list() == list(range(n))
