"""The official Python Zerobus SDK (1.10.0) with an Avro writer schema
(`TableProperties(name, avro_schema=...)`) against a real Sluice process, read back with
Python `deltalake` and `polars`.

Contract under test: dict records (encoded by the SDK through fastavro) and datums
pre-encoded with fastavro's `schemaless_writer` (passed through as bytes) land in the Delta
table exactly once with the values that were sent: every column type the Avro compile maps
(nullable unions, logical types date / timestamp-micros / timestamp-millis /
local-timestamp-micros / decimal / uuid, an enum, fixed, arrays, maps, a nested record),
with nulls in every nullable column.
"""

import datetime
import decimal
import io
import json
import uuid

import fastavro
import polars as pl
from deltalake import DeltaTable
from zerobus import TableProperties

from conftest import CLIENT_ID, CLIENT_SECRET, create_table, map_entries, plain_sdk

COLUMNS = [
    ("id", "bigint", "LONG", False),
    ("n32", "int", "INT", True),
    ("score", "double", "DOUBLE", True),
    ("f32", "float", "FLOAT", True),
    ("flag", "boolean", "BOOLEAN", True),
    ("name", "string", "STRING", True),
    ("raw", "binary", "BINARY", True),
    ("fx", "binary", "BINARY", True),
    ("day", "date", "DATE", True),
    ("ts", "timestamp", "TIMESTAMP", True),
    ("tsm", "timestamp", "TIMESTAMP", True),
    ("ntz", "timestamp_ntz", "TIMESTAMP_NTZ", True),
    ("price", "string", "STRING", True),
    ("uid", "string", "STRING", True),
    ("color", "string", "STRING", True),
    ("tags", "array<string>", "ARRAY", True),
    ("attrs", "map<string,bigint>", "MAP", True),
    ("pos", "struct<x:int,label:string>", "STRUCT", True),
]


def nullable(t):
    return ["null", t]


SCHEMA = {
    "type": "record",
    "name": "Row",
    "namespace": "py",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "n32", "type": nullable("int")},
        {"name": "score", "type": nullable("double")},
        {"name": "f32", "type": nullable("float")},
        {"name": "flag", "type": nullable("boolean")},
        {"name": "name", "type": nullable("string")},
        {"name": "raw", "type": nullable("bytes")},
        {"name": "fx", "type": nullable({"type": "fixed", "name": "Four", "size": 4})},
        {"name": "day", "type": nullable({"type": "int", "logicalType": "date"})},
        {"name": "ts", "type": nullable({"type": "long", "logicalType": "timestamp-micros"})},
        {"name": "tsm", "type": nullable({"type": "long", "logicalType": "timestamp-millis"})},
        {"name": "ntz", "type": nullable({"type": "long", "logicalType": "local-timestamp-micros"})},
        {"name": "price", "type": nullable({"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3})},
        {"name": "uid", "type": nullable({"type": "string", "logicalType": "uuid"})},
        {"name": "color", "type": nullable({"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]})},
        {"name": "tags", "type": nullable({"type": "array", "items": nullable("string")})},
        {"name": "attrs", "type": nullable({"type": "map", "values": nullable("long")})},
        {"name": "pos", "type": nullable({"type": "record", "name": "Pos", "fields": [
            {"name": "x", "type": "int"}, {"name": "label", "type": nullable("string")}]})},
    ],
}

N = 20_000
UTC = datetime.timezone.utc
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)
BASE_US = 1_700_000_000_000_000


def row(i):
    """Record i as fastavro takes it; every nullable field is None on every 7th record."""
    if i % 7 == 3:
        return {f["name"]: (i if f["name"] == "id" else None) for f in SCHEMA["fields"]}
    return {
        "id": i,
        "n32": i * 3 - 10_000,
        "score": i / 8,
        "f32": float(i % 1000) / 4,
        "flag": i % 2 == 0,
        "name": f"dev-{i % 5}",
        "raw": i.to_bytes(4, "little"),
        "fx": (i * 7).to_bytes(4, "big"),
        "day": datetime.date(1970, 1, 1) + datetime.timedelta(days=i % 20000),
        "ts": EPOCH + datetime.timedelta(microseconds=BASE_US + i),
        "tsm": EPOCH + datetime.timedelta(milliseconds=1_700_000_000_000 + i),
        "ntz": datetime.datetime(2024, 1, 1) + datetime.timedelta(seconds=i),
        "price": decimal.Decimal(i * 1001 - 5_000_000).scaleb(-3),
        "uid": uuid.UUID(int=i * 7919 + 1),
        "color": ["RED", "GREEN", "BLUE"][i % 3],
        "tags": [str(i), None, "z"] if i % 2 else [],
        "attrs": {"a": i, "b": None},
        "pos": {"x": i, "label": None if i % 3 else f"p{i}"},
    }


def expected(i):
    """Record i as the Delta row polars must give back."""
    r = row(i)
    if i % 7 == 3:
        return r
    out = dict(r)
    out["ts"] = datetime.datetime.fromtimestamp(0, UTC).replace(tzinfo=None) + datetime.timedelta(microseconds=BASE_US + i)
    out["tsm"] = datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=1_700_000_000_000 + i)
    out["price"] = f"{r['price']:.3f}"
    out["uid"] = str(r["uid"])
    out["attrs"] = [("a", i), ("b", None)]
    return out


def encoded(parsed, i):
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, row(i))
    return out.getvalue()



def test_avro_records_and_datums_from_the_python_sdk_land_in_delta_exactly(server):
    create_table(server, "main.py.avro_rows", COLUMNS)
    sdk = plain_sdk(server)
    props = TableProperties("main.py.avro_rows", avro_schema=json.dumps(SCHEMA))
    half = N // 2
    # Dict records: the SDK encodes them with fastavro (one by one, then batches).
    stream = sdk.create_stream(CLIENT_ID, CLIENT_SECRET, props)
    for i in range(0, 100):
        stream.ingest_record_offset(row(i))
    for start in range(100, half, 500):
        stream.ingest_records_offset([row(i) for i in range(start, min(start + 500, half))])
    stream.flush()
    stream.close()
    # Pre-encoded datums pass through as bytes.
    parsed = fastavro.parse_schema(SCHEMA)
    stream = sdk.create_stream(CLIENT_ID, CLIENT_SECRET, props)
    for start in range(half, N, 500):
        stream.ingest_records_offset([encoded(parsed, i) for i in range(start, min(start + 500, N))])
    stream.flush()
    stream.close()
    server.stop()  # graceful stop commits every memtable

    location = str(server.data_dir / "warehouse" / "main" / "py" / "avro_rows")
    df = pl.from_arrow(DeltaTable(location).to_pyarrow_table()).sort("id")
    assert df.height == N
    assert df["id"].to_list() == list(range(N))
    want_rows = [expected(i) for i in range(N)]
    for name in df.columns:
        got = df[name].to_list()
        want = [r[name] for r in want_rows]
        if name == "attrs":
            got = [map_entries(m) for m in got]
        if name in ("ts", "tsm", "ntz"):
            got = [None if t is None else t.replace(tzinfo=None) for t in got]
        assert got == want, f"column {name} differs: {got[:3]} vs {want[:3]}"
    assert df.filter(pl.col("id") == 3)["name"].to_list() == [None]
