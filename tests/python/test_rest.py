"""REST insert (`POST /zerobus/v1/tables/{table}/insert`) against a real `sluice serve`, with
Python `requests` and `curl`; rows read back with Python `deltalake` and `polars`.

Contracts under test: 200 with an empty body means the records are durable and they land
in Delta exactly once; JSON arrays, NDJSON, gzip and zstd bodies; 200 concurrent clients;
an `Idempotency-Key` retried after a SIGKILL between the write and the answer is acknowledged
without writing again; every refusal class gets its status and `{"error_code", "message"}`,
and nothing of a refused request is written.
"""

import concurrent.futures
import gzip
import json
import os
import subprocess
import time

import polars as pl
import pytest
import requests
from deltalake import DeltaTable

from conftest import Server
from test_cluster import cluster  # noqa: F401 (the fixture)

COLUMNS = [{"name": "id", "type_text": "bigint", "type_name": "LONG", "nullable": False},
           {"name": "temp", "type_text": "double", "type_name": "DOUBLE", "nullable": True}]
TABLE = "main.rest.t"
PAUSE_ENV = "SLUICE_TEST_REST_PAUSE_AFTER_DURABLE"


def create_table(server, name=TABLE):
    return server.api("POST", "", {"name": name, "columns": COLUMNS})["storage_location"]


def insert_url(server, table=TABLE):
    return f"{server.url}/zerobus/v1/tables/{table}/insert"


def post(server, body, token, table=TABLE, headers=None, timeout=30):
    h = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
    h.update(headers or {})
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return requests.post(insert_url(server, table), data=data, headers=h, timeout=timeout)


def ids_in_delta(location, expect=None, timeout=30):
    """The sorted ids in the table, polled until `expect` rows are there (or timeout)."""
    deadline = time.time() + timeout
    while True:
        try:
            df = pl.from_arrow(DeltaTable(location).to_pyarrow_table())
            ids = sorted(df["id"].to_list())
        except Exception:  # the table has no commit yet
            ids = []
        if expect is None or len(ids) >= expect or time.time() > deadline:
            return ids
        time.sleep(0.2)


def test_json_array_ndjson_gzip_and_zstd_bodies_land_once(server):
    location = create_table(server)
    token = server.token()
    r = post(server, [{"id": 0, "temp": 1.5}, {"id": 1}], token)
    assert (r.status_code, r.content) == (200, b"")
    ndjson = "\n".join(json.dumps({"id": i, "temp": i / 2}) for i in range(2, 5)) + "\n"
    r = post(server, ndjson, token, headers={"Content-Type": "application/x-ndjson"})
    assert r.status_code == 200, r.text
    gz = gzip.compress(json.dumps([{"id": 5}, {"id": 6}]).encode())
    r = post(server, gz, token, headers={"Content-Encoding": "gzip"})
    assert r.status_code == 200, r.text
    zst = subprocess.run(["zstd", "-q", "-c"], input=json.dumps([{"id": 7}]).encode(),
                         capture_output=True, check=True).stdout
    r = post(server, zst, token, headers={"Content-Encoding": "zstd"})
    assert r.status_code == 200, r.text
    assert ids_in_delta(location, 8) == list(range(8))
    df = pl.from_arrow(DeltaTable(location).to_pyarrow_table()).sort("id")
    assert df["temp"].to_list()[:5] == [1.5, None, 1.0, 1.5, 2.0]


def test_curl_posts_a_file_and_reads_the_error_body(server, tmp_path):
    location = create_table(server)
    token = server.token()
    body = tmp_path / "rows.json"
    body.write_text(json.dumps([{"id": 10, "temp": 0.5}]))

    def curl(*args):
        out = subprocess.run(["curl", "-sS", "-o", str(tmp_path / "out"), "-w", "%{http_code}",
                              "-H", "Authorization: Bearer " + token, *args],
                             capture_output=True, text=True, check=True)
        return int(out.stdout), (tmp_path / "out").read_bytes()

    status, answer = curl("-X", "POST", "-H", "Content-Type: application/json",
                          "--data-binary", f"@{body}", insert_url(server))
    assert (status, answer) == (200, b"")
    # curl -d without a content type sends application/x-www-form-urlencoded: refused.
    status, answer = curl("-d", "[{\"id\": 11}]", insert_url(server))
    assert status == 415
    assert json.loads(answer)["error_code"] == "INVALID_PARAMETER_VALUE"
    assert ids_in_delta(location, 1) == [10]


def test_200_concurrent_clients_every_row_once(server):
    location = create_table(server)
    token = server.token()
    clients, requests_each, per_request = 200, 5, 10

    def client(c):
        with requests.Session() as s:
            for r in range(requests_each):
                base = (c * requests_each + r) * per_request
                rows = [{"id": base + i, "temp": float(c)} for i in range(per_request)]
                resp = s.post(insert_url(server), data=json.dumps(rows), timeout=60,
                              headers={"Authorization": "Bearer " + token,
                                       "Content-Type": "application/json"})
                assert resp.status_code == 200, resp.text
        return c

    with concurrent.futures.ThreadPoolExecutor(max_workers=clients) as pool:
        done = list(pool.map(client, range(clients)))
    assert len(done) == clients
    total = clients * requests_each * per_request
    assert ids_in_delta(location, total, timeout=60) == list(range(total))


def test_idempotency_key_survives_a_sigkill_between_write_and_answer(tmp_path, monkeypatch):
    monkeypatch.setenv(PAUSE_ENV, "4s")
    first = Server(tmp_path)
    location = create_table(first)
    token = first.token()
    rows = [{"id": i} for i in range(3)]
    key = {"Idempotency-Key": "batch-0001"}
    with pytest.raises(requests.exceptions.Timeout):
        post(first, rows, token, headers=key, timeout=1.5)
    log = (tmp_path / "server.log").read_text()
    assert "pausing" in log, "the records must be durable before the kill"
    first.proc.kill()  # SIGKILL: the answer is never sent
    first.proc.wait()
    first.log.close()
    monkeypatch.delenv(PAUSE_ENV)

    second = Server(tmp_path)
    try:
        token = second.token()
        r = post(second, rows, token, headers=key)
        assert (r.status_code, r.content) == (200, b"")
        r = post(second, rows, token, headers=key)
        assert r.status_code == 200
        # Control: another key writes again, so the check below can fail.
        r = post(second, [{"id": 3}], token, headers={"Idempotency-Key": "batch-0002"})
        assert r.status_code == 200
        assert "idempotency keys restored" in (tmp_path / "server.log").read_text()
    finally:
        second.stop()
    assert ids_in_delta(location, 4) == [0, 1, 2, 3]


def test_refusals_have_their_status_and_error_body(tmp_path):
    server = Server(tmp_path, extra=["--max-request-bytes", "65536", "--max-record-bytes", "65536"])
    try:
        location = create_table(server)
        token = server.token()

        def refused(resp, status, code, *words):
            assert resp.status_code == status, resp.text
            body = resp.json()
            assert body["error_code"] == code, body
            for w in words:
                assert w in body["message"], body
            return body

        refused(post(server, b"[{\"id\": 1},", token), 400, "INVALID_PARAMETER_VALUE", "malformed")
        refused(post(server, [{"id": 1}, 5], token), 400, "INVALID_PARAMETER_VALUE",
                "record 1: expected a JSON object")
        rows = [{"id": i, "temp": 1.0} for i in range(17)] + [{"id": 17, "temp": "warm"}]
        refused(post(server, rows, token), 400, "INVALID_PARAMETER_VALUE",
                "record 17: field `temp`")
        refused(post(server, [], token), 400, "INVALID_PARAMETER_VALUE", "no records")
        refused(post(server, [{"id": 1}], token, headers={"Content-Type": "text/plain"}),
                415, "INVALID_PARAMETER_VALUE", "content type")
        refused(post(server, [{"id": 1}], token, headers={"Content-Encoding": "br"}),
                415, "INVALID_PARAMETER_VALUE", "content encoding")
        big = [{"id": i, "temp": 0.0} for i in range(5000)]
        refused(post(server, big, token), 413, "REQUEST_LIMIT_EXCEEDED", "over the limit")
        bomb = gzip.compress(b"[" + b" " * (8 << 20) + b"]")
        assert len(bomb) < 65536
        refused(post(server, bomb, token, headers={"Content-Encoding": "gzip"}),
                413, "REQUEST_LIMIT_EXCEEDED", "once decompressed")
        refused(post(server, b"not gzip", token, headers={"Content-Encoding": "gzip"}),
                400, "INVALID_PARAMETER_VALUE", "decompress")
        refused(post(server, [{"id": 1}], token, table="main.rest.nope"), 404, "NOT_FOUND",
                "does not exist")
        r = requests.post(insert_url(server), json=[{"id": 1}], timeout=10)
        refused(r, 401, "UNAUTHENTICATED", "authorization")
        refused(post(server, [{"id": 1}], "not-a-token"), 401, "UNAUTHENTICATED")
        # A principal with MODIFY on TABLE only (the grants streams use): its token writes
        # TABLE, is refused on another table, and is refused once the grant is revoked.
        create_table(server, "main.rest.other")
        admin = {"Authorization": "Bearer " + token}
        created = requests.post(server.url + "/api/sluice/v1/principals", json={"name": "writer"},
                                headers=admin, timeout=10).json()

        def grant(change):
            r = requests.patch(server.url + "/api/2.1/unity-catalog/permissions/table/" + TABLE,
                               json={"changes": [dict(principal="writer", **change)]},
                               headers=admin, timeout=10)
            assert r.status_code == 200, r.text

        grant({"add": ["MODIFY"]})
        details = json.dumps([{"type": "unity_catalog_privileges", "privileges": ["MODIFY"],
                               "object_type": "TABLE", "object_full_path": TABLE}])
        weak = requests.post(server.url + "/oidc/v1/token",
                             data={"grant_type": "client_credentials",
                                   "authorization_details": details},
                             auth=(created["client_id"], created["client_secret"]),
                             timeout=10).json()["access_token"]
        assert post(server, [{"id": 98}], weak).status_code == 200
        refused(post(server, [{"id": 1}], weak, table="main.rest.other"), 403,
                "PERMISSION_DENIED", "main.rest.other")
        grant({"remove": ["MODIFY"]})
        refused(post(server, [{"id": 1}], weak), 403, "PERMISSION_DENIED", "no longer holds MODIFY")
        r = requests.get(insert_url(server), headers={"Authorization": "Bearer " + token}, timeout=10)
        refused(r, 405, "METHOD_NOT_ALLOWED")
        assert r.headers["Allow"] == "POST"
        refused(requests.post(server.url + "/zerobus/v1/tables/x/upsert", json=[], timeout=10),
                404, "ENDPOINT_NOT_FOUND")
        refused(requests.get(server.url + "/no/such/path", timeout=10), 404, "ENDPOINT_NOT_FOUND")
        refused(requests.post(server.url + "/databricks.zerobus.Zerobus/EphemeralStream",
                              json={}, timeout=10), 415, "INVALID_PARAMETER_VALUE", "gRPC")
        # Each refused insert is counted by its gRPC code in sluice_refusals_total, beside
        # stream refusals (the status page's refusals panel); the router-level answers (405,
        # unknown paths, gRPC on the HTTP port) are not inserts and are not counted.
        text = requests.get(server.url + "/metrics", timeout=10).text
        counted = {}
        for line in text.splitlines():
            if line.startswith('sluice_refusals_total{code="'):
                series, value = line.rsplit(" ", 1)
                counted[series.split('"')[1]] = float(value)
        assert counted == {"InvalidArgument": 7, "ResourceExhausted": 2, "NotFound": 1,
                           "Unauthenticated": 2, "PermissionDenied": 2}, text
        # Nothing of a refused request was written: only the accepted ones land.
        assert post(server, [{"id": 99}], token).status_code == 200
    finally:
        server.stop()
    assert ids_in_delta(location, 2) == [98, 99]


def test_rest_and_not_served_paths_through_the_router(cluster):
    from test_cluster import through
    url, pods = cluster
    token = pods[0].token()
    created = through(url, "POST", "/api/2.1/unity-catalog/tables",
                      {"name": "main.rest.routed", "columns": COLUMNS}, token)
    headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
    for i in range(4):  # round robin: both pods take REST inserts
        r = requests.post(url + "/zerobus/v1/tables/main.rest.routed/insert",
                          data=json.dumps([{"id": 2 * i}, {"id": 2 * i + 1}]), headers=headers,
                          timeout=30)
        assert (r.status_code, r.content) == (200, b"")
    r = requests.get(url + "/zerobus/v1/tables/main.rest.routed/insert", headers=headers, timeout=10)
    assert (r.status_code, r.json()["error_code"], r.headers["Allow"]) == (405, "METHOD_NOT_ALLOWED",
                                                                          "POST")
    r = requests.post(url + "/zerobus/v1/tables/x/insertt", json=[], timeout=10)
    assert (r.status_code, r.json()["error_code"]) == (404, "ENDPOINT_NOT_FOUND")
    assert "grpc-status" not in r.headers
    for pod in pods:
        pod.stop()
    assert ids_in_delta(created["storage_location"], 8) == list(range(8))
