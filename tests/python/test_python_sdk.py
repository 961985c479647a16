"""The official Python Zerobus SDK (1.10.0) against a real Sluice process, read
back with Python `deltalake` and `polars`.

Contract under test: every record the SDK saw acknowledged after `flush()` is
in the Delta table exactly once, with the values that were sent, for JSON and
protobuf streams, single-record and batch calls.
"""

import json

import polars as pl
from deltalake import DeltaTable
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from zerobus import TableProperties, ZerobusSdk
from zerobus.sdk.shared import RecordType, StreamConfigurationOptions

from conftest import CLIENT_ID, CLIENT_SECRET

COLUMNS = [
    {"name": "id", "type_text": "bigint", "type_name": "LONG", "nullable": False},
    {"name": "device", "type_text": "string", "type_name": "STRING", "nullable": True},
    {"name": "temp", "type_text": "double", "type_name": "DOUBLE", "nullable": True},
    {"name": "ts", "type_text": "timestamp", "type_name": "TIMESTAMP", "nullable": True},
    {"name": "tags", "type_text": "array<string>", "type_name": "ARRAY", "nullable": True},
]


def sdk_for(server):
    sdk = ZerobusSdk(server.url, server.url)
    sdk._inner.set_use_tls(False)
    return sdk


def table_path(server, name):
    return server.api("GET", "/" + name)["storage_location"]


def read_sorted(location):
    return pl.from_arrow(DeltaTable(location).to_pyarrow_table()).sort("id")


def test_json_records_from_the_python_sdk_land_in_delta_exactly_once(server):
    server.api("POST", "", {"name": "main.py.json_rows", "columns": COLUMNS})
    sdk = sdk_for(server)
    options = StreamConfigurationOptions(record_type=RecordType.JSON)
    stream = sdk.create_stream(CLIENT_ID, CLIENT_SECRET, TableProperties("main.py.json_rows"), options)
    n = 2000
    for i in range(n // 2):
        stream.ingest_record_offset(json.dumps(
            {"id": i, "device": f"dev-{i % 7}", "temp": i / 4, "ts": 1_700_000_000_000_000 + i, "tags": ["a", str(i)]}))
    batch = [json.dumps({"id": i, "device": None, "temp": -1.5, "ts": None, "tags": []}) for i in range(n // 2, n)]
    for start in range(0, len(batch), 100):
        stream.ingest_records_offset(batch[start:start + 100])
    stream.flush()
    stream.close()
    server.stop()  # graceful stop commits every memtable

    df = read_sorted(table_path_from_disk(server, "main/py/json_rows"))
    assert df.height == n
    assert df["id"].to_list() == list(range(n))
    first = df.row(3, named=True)
    assert first["device"] == "dev-3" and first["temp"] == 0.75 and first["tags"] == ["a", "3"]
    assert first["ts"].timestamp() * 1_000_000 == 1_700_000_000_000_003
    last = df.row(n - 1, named=True)
    assert last["device"] is None and last["ts"] is None and last["tags"] == [] and last["temp"] == -1.5


def table_path_from_disk(server, rel):
    return str(server.data_dir / "warehouse" / rel)


def proto_class():
    fdp = descriptor_pb2.FileDescriptorProto(name="telemetry.proto", package="t", syntax="proto2")
    msg = fdp.message_type.add(name="Telemetry")
    L = descriptor_pb2.FieldDescriptorProto
    msg.field.add(name="id", number=1, type=L.TYPE_INT64, label=L.LABEL_OPTIONAL)
    msg.field.add(name="device", number=2, type=L.TYPE_STRING, label=L.LABEL_OPTIONAL)
    msg.field.add(name="temp", number=3, type=L.TYPE_DOUBLE, label=L.LABEL_OPTIONAL)
    msg.field.add(name="ts", number=4, type=L.TYPE_INT64, label=L.LABEL_OPTIONAL)
    msg.field.add(name="tags", number=5, type=L.TYPE_STRING, label=L.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    desc = pool.FindMessageTypeByName("t.Telemetry")
    return message_factory.GetMessageClass(desc), desc


def test_proto_records_from_the_python_sdk_land_in_delta_with_their_values(server):
    server.api("POST", "", {"name": "main.py.proto_rows", "columns": COLUMNS})
    Telemetry, desc = proto_class()
    sdk = sdk_for(server)
    stream = sdk.create_stream(CLIENT_ID, CLIENT_SECRET, TableProperties("main.py.proto_rows", desc))
    n = 3000
    for i in range(n):
        m = Telemetry(id=i, device=f"d{i}", ts=1_000_000 * i, tags=[str(i), "x"])
        if i % 2 == 0:
            m.temp = i * 0.5
        stream.ingest_record_offset(m.SerializeToString())
    stream.flush()
    stream.close()
    server.stop()

    df = read_sorted(table_path_from_disk(server, "main/py/proto_rows"))
    assert df.height == n
    assert df["id"].to_list() == list(range(n))
    assert df["device"].to_list() == [f"d{i}" for i in range(n)]
    assert df["temp"].to_list() == [i * 0.5 if i % 2 == 0 else None for i in range(n)]
    assert df["tags"].to_list() == [[str(i), "x"] for i in range(n)]
