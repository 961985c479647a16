"""The audit table as a data team sees it: a single-node `sluice serve --audit-table
main.sluice.audit`, control-plane changes made through the HTTP API, then the audit Delta
table read with polars like any other table (after a graceful restart, so the rows are the
committed ones, not a memtable's).
"""

import json
import urllib.request

import polars as pl

from conftest import CLIENT_ID, Server

AUDIT = "main.sluice.audit"


def call(server, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(server.url + path, data=data, method=method,
                                 headers={"Authorization": "Bearer " + server.token(),
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)


def test_control_plane_changes_are_rows_polars_reads(tmp_path):
    server = Server(tmp_path, extra=["--audit-table", AUDIT])
    try:
        created = server.api("POST", "", {"name": "main.t.readings",
                                "columns": [{"name": "id", "type_text": "BIGINT", "type_name": "LONG",
                                             "nullable": False}]})
        call(server, "POST", "/api/sluice/v1/principals", {"name": "carol"})
        call(server, "PATCH", "/api/2.1/unity-catalog/permissions/table/main.t.readings",
             {"changes": [{"principal": "carol", "add": ["MODIFY"]}]})
        call(server, "PATCH", "/api/2.1/unity-catalog/permissions/table/main.t.readings",
             {"changes": [{"principal": "carol", "remove": ["MODIFY"]}]})
        kid = call(server, "POST", "/api/sluice/v1/keys/rotate")["kid"]
        call(server, "DELETE", "/api/sluice/v1/principals/carol")
        server.api("DELETE", "/main.t.readings")
        location = server.api("GET", "/" + AUDIT)["storage_location"]
    finally:
        server.stop()
    server = Server(tmp_path, extra=["--audit-table", AUDIT])
    server.stop()

    df = pl.read_delta(location).sort("event_time")
    assert df.schema["event_time"] == pl.Datetime("us", "UTC")
    rows = df.select("who", "action", "target", "pod", "detail").rows()
    assert rows == [
        (CLIENT_ID, "table.create", "main.t.readings", "single-node", created["storage_location"]),
        (CLIENT_ID, "principal.create", "carol", "single-node", ""),
        (CLIENT_ID, "grant", "main.t.readings", "single-node", "MODIFY to carol"),
        (CLIENT_ID, "revoke", "main.t.readings", "single-node", "MODIFY to carol"),
        (CLIENT_ID, "keys.rotate", kid, "single-node", ""),
        (CLIENT_ID, "principal.delete", "carol", "single-node", ""),
        (CLIENT_ID, "table.drop", "main.t.readings", "single-node", ""),
    ]
    # Who did what, the way an auditor would ask it.
    grants = df.filter(pl.col("action").is_in(["grant", "revoke"])).select("who").to_series().to_list()
    assert grants == [CLIENT_ID, CLIENT_ID]
