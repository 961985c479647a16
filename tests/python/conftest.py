"""Starts a real `sluice serve` process for the Python SDK tests.

The binary comes from SLUICE_BIN (the test script points it at the one
`cargo test` built); each test gets a fresh data directory and port.
"""

import json
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
import base64

import pytest

CLIENT_ID = "py-admin"
CLIENT_SECRET = "py-admin-secret-0123456789abcdefghij"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A pod; with `tls` (the files of `test_tls.make_certs`) it serves TLS with the
    certificate `server.pem`, and this client trusts `ca.pem`."""

    def __init__(self, data_dir, flush_interval="200ms", extra=(), tls=None):
        self.port = free_port()
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.ssl = ssl.create_default_context(cafile=tls["ca.pem"]) if tls else None
        if tls:
            extra = ("--tls-cert", tls["server.pem"], "--tls-key", tls["server.key"], *extra)
        self.data_dir = data_dir
        binary = os.environ.get("SLUICE_BIN", "target/debug/sluice")
        self.log = open(os.path.join(data_dir, "server.log"), "wb")
        self.proc = subprocess.Popen(
            [binary, "serve", "--data-dir", str(data_dir), "--listen", f"127.0.0.1:{self.port}",
             "--flush-interval", flush_interval, "--bootstrap-principal", f"{CLIENT_ID}:{CLIENT_SECRET}",
             *extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1,
                                            context=self.ssl) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("sluice did not start; see " + os.path.join(data_dir, "server.log"))

    def token(self):
        auth = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
        req = urllib.request.Request(self.url + "/oidc/v1/token", data=b"grant_type=client_credentials",
                                     headers={"Authorization": "Basic " + auth})
        with urllib.request.urlopen(req, context=self.ssl) as r:
            return json.load(r)["access_token"]

    def api(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + "/api/2.1/unity-catalog/tables" + path, data=data, method=method,
                                     headers={"Authorization": "Bearer " + self.token(),
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, context=self.ssl) as r:
            return json.load(r)

    def metrics(self):
        """The pod's /metrics text."""
        with urllib.request.urlopen(self.url + "/metrics", context=self.ssl, timeout=10) as r:
            return r.read().decode()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def metric(text, name, **labels):
    """The sum of the samples of `name` in Prometheus text whose labels include `labels`."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path)
    yield s
    s.stop()


def create_table(server, name, columns):
    """Creates table `name` from (name, type_text, type_name, nullable) tuples."""
    server.api("POST", "", {"name": name, "columns": [
        {"name": n, "type_text": t, "type_name": tn, "nullable": nl} for n, t, tn, nl in columns]})


def plain_sdk(server):
    """The official Python SDK pointed at `server` over plain HTTP/2 (no TLS)."""
    from zerobus import ZerobusSdk

    sdk = ZerobusSdk(server.url, server.url)
    sdk._inner.set_use_tls(False)
    return sdk


def map_entries(m):
    """A map value as sorted (key, value) pairs, whichever form polars gave it."""
    if m is None:
        return None
    if isinstance(m, dict):
        return sorted(m.items())
    return sorted((e["key"], e["value"]) for e in m)
