"""The official Python Zerobus SDK with TLS on.

The test makes a CA and a server certificate (`cryptography`), starts
`sluice serve --tls-cert --tls-key`, and points the SDK at `https://`. The
SDK (a Rust core using the system roots for both its gRPC channel and its
OAuth client) is told to trust the test CA through `SSL_CERT_FILE`.
"""

import datetime
import ipaddress
import json
import os
import signal
import ssl
import subprocess
import time
import urllib.request

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from deltalake import DeltaTable
from zerobus import TableProperties, ZerobusSdk
from zerobus.sdk.shared import RecordType, StreamConfigurationOptions

from conftest import CLIENT_ID, CLIENT_SECRET, free_port


def make_certs(directory):
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Sluice Python test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = {name: os.path.join(directory, name) for name in ("ca.pem", "server.pem", "server.key")}
    with open(paths["ca.pem"], "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(paths["server.pem"], "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(paths["server.key"], "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return paths


def test_python_sdk_writes_over_tls_trusting_a_test_ca(tmp_path, monkeypatch):
    certs = make_certs(str(tmp_path))
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    data = tmp_path / "pod"
    binary = os.environ.get("SLUICE_BIN", "target/debug/sluice")
    log = open(tmp_path / "server.log", "wb")
    proc = subprocess.Popen(
        [binary, "serve", "--data-dir", str(data), "--listen", f"127.0.0.1:{port}",
         "--flush-interval", "200ms", "--bootstrap-principal", f"{CLIENT_ID}:{CLIENT_SECRET}",
         "--tls-cert", certs["server.pem"], "--tls-key", certs["server.key"]],
        stdout=log, stderr=subprocess.STDOUT)
    context = ssl.create_default_context(cafile=certs["ca.pem"])
    try:
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=1, context=context) as r:
                    if r.status == 200:
                        break
            except OSError:
                assert time.time() < deadline, (tmp_path / "server.log").read_text()
                time.sleep(0.1)

        import base64
        auth = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
        req = urllib.request.Request(url + "/oidc/v1/token", data=b"grant_type=client_credentials",
                                     headers={"Authorization": "Basic " + auth})
        with urllib.request.urlopen(req, context=context) as r:
            token = json.load(r)["access_token"]
        body = {"name": "main.py.tls", "columns": [
            {"name": "id", "type_text": "bigint", "type_name": "LONG", "nullable": False}]}
        req = urllib.request.Request(url + "/api/2.1/unity-catalog/tables", data=json.dumps(body).encode(),
                                     method="POST", headers={"Authorization": "Bearer " + token,
                                                             "Content-Type": "application/json"})
        with urllib.request.urlopen(req, context=context) as r:
            location = json.load(r)["storage_location"]

        monkeypatch.setenv("SSL_CERT_FILE", certs["ca.pem"])
        monkeypatch.setenv("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", certs["ca.pem"])
        sdk = ZerobusSdk(url, url)  # TLS on: the SDK's default
        stream = sdk.create_stream(CLIENT_ID, CLIENT_SECRET, TableProperties("main.py.tls"),
                                   StreamConfigurationOptions(record_type=RecordType.JSON))
        for i in range(500):
            stream.ingest_record_offset(json.dumps({"id": i}))
        stream.flush()
        stream.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        log.close()
    assert DeltaTable(location).to_pyarrow_table().num_rows == 500
