"""The official Python Zerobus SDK (1.10.0) Arrow Flight door (`create_arrow_stream`)
against a real Sluice process, read back with Python `deltalake` and `polars`.

Contract under test: 100 000 rows of every column type a table supports, with nulls in
every nullable column, sent as pyarrow record batches (uncompressed, LZ4 and ZSTD IPC
bodies, one dictionary-encoded column) land in the Delta table exactly once with the
values that were sent.
"""

import datetime
import json

import polars as pl
import pyarrow as pa
from deltalake import DeltaTable
from zerobus.sdk.shared.arrow import ArrowStreamConfigurationOptions, IPCCompression

from conftest import CLIENT_ID, CLIENT_SECRET, create_table, map_entries, plain_sdk

COLUMNS = [
    ("id", "bigint", "LONG", False),
    ("t8", "tinyint", "BYTE", True),
    ("s16", "smallint", "SHORT", True),
    ("i32", "int", "INT", True),
    ("f32", "float", "FLOAT", True),
    ("f64", "double", "DOUBLE", True),
    ("name", "string", "STRING", True),
    ("flag", "boolean", "BOOLEAN", True),
    ("raw", "binary", "BINARY", True),
    ("day", "date", "DATE", True),
    ("ts", "timestamp", "TIMESTAMP", True),
    ("ntz", "timestamp_ntz", "TIMESTAMP_NTZ", True),
    ("v", "variant", "VARIANT", True),
    ("tags", "array<string>", "ARRAY", True),
    ("attrs", "map<string,int>", "MAP", True),
    ("pos", "struct<x:int,label:string>", "STRUCT", True),
]

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("t8", pa.int8()),
    pa.field("s16", pa.int16()),
    pa.field("i32", pa.int32()),
    pa.field("f32", pa.float32()),
    pa.field("f64", pa.float64()),
    pa.field("name", pa.dictionary(pa.int32(), pa.string())),
    pa.field("flag", pa.bool_()),
    pa.field("raw", pa.binary()),
    pa.field("day", pa.date32()),
    pa.field("ts", pa.timestamp("us", tz="UTC")),
    pa.field("ntz", pa.timestamp("us")),
    pa.field("v", pa.string()),
    pa.field("tags", pa.list_(pa.string())),
    pa.field("attrs", pa.map_(pa.string(), pa.int32())),
    pa.field("pos", pa.struct([pa.field("x", pa.int32()), pa.field("label", pa.string())])),
])

N = 100_000
BATCH = 10_000
EPOCH_US = 1_700_000_000_000_000


def row(i):
    """Row i; every nullable column is null on every 7th row."""
    if i % 7 == 3:
        return {"id": i}
    return {
        "id": i,
        "t8": i % 128 - 64,
        "s16": i % 30000 - 15000,
        "i32": i * 3 - 100_000,
        "f32": float(i % 1000) / 4,
        "f64": i / 8,
        "name": f"dev-{i % 5}",
        "flag": i % 2 == 0,
        "raw": i.to_bytes(4, "little"),
        "day": datetime.date(1970, 1, 1) + datetime.timedelta(days=i % 20000),
        "ts": EPOCH_US + i,
        "ntz": EPOCH_US - i,
        "v": json.dumps({"k": i, "a": [1, "x"]}, separators=(",", ":")),
        "tags": [str(i), None, "z"] if i % 2 else [],
        "attrs": [("a", i), ("b", None)],
        "pos": {"x": i, "label": None if i % 3 else f"p{i}"},
    }


def batch(start, stop):
    rows = [row(i) for i in range(start, stop)]
    cols = {}
    for f in SCHEMA:
        values = [r.get(f.name) for r in rows]
        if f.name in ("ts", "ntz"):
            values = [None if v is None else v for v in values]
            cols[f.name] = pa.array(values, pa.int64()).cast(f.type)
        elif f.name == "name":
            cols[f.name] = pa.array(values, pa.string()).dictionary_encode()
        else:
            cols[f.name] = pa.array(values, f.type)
    return pa.RecordBatch.from_arrays([cols[f.name] for f in SCHEMA], schema=SCHEMA)



def test_arrow_batches_from_the_python_sdk_land_in_delta_exactly(server):
    create_table(server, "main.py.arrow_rows", COLUMNS)
    sdk = plain_sdk(server)
    # Three streams, one per IPC body compression, each a third of the rows.
    thirds = [(0, 30_000), (30_000, 60_000), (60_000, N)]
    for (lo, hi), compression in zip(thirds, [IPCCompression.NONE, IPCCompression.LZ4_FRAME, IPCCompression.ZSTD]):
        options = ArrowStreamConfigurationOptions(ipc_compression=compression)
        stream = sdk.create_arrow_stream("main.py.arrow_rows", SCHEMA, CLIENT_ID, CLIENT_SECRET, options)
        for start in range(lo, hi, BATCH):
            stream.ingest_batch(batch(start, min(start + BATCH, hi)))
        stream.flush()
        stream.close()
    server.stop()  # graceful stop commits every memtable

    location = str(server.data_dir / "warehouse" / "main" / "py" / "arrow_rows")
    df = pl.from_arrow(DeltaTable(location).to_pyarrow_table()).sort("id")
    assert df.height == N
    assert df["id"].to_list() == list(range(N))
    expected = pl.from_arrow(pa.Table.from_batches([batch(0, N)]).cast(pa.schema([
        pa.field(f.name, pa.string() if f.name == "name" else f.type, f.nullable) for f in SCHEMA
    ])))
    for name in df.columns:
        got, want = df[name].to_list(), expected[name].to_list()
        if name == "attrs":
            got, want = [map_entries(m) for m in got], [map_entries(m) for m in want]
        if name in ("ts", "ntz"):
            got = [None if t is None else t.replace(tzinfo=None) for t in got]
            want = [None if t is None else t.replace(tzinfo=None) for t in want]
        assert got == want, f"column {name} differs"
    assert df.filter(pl.col("id") == 3)["name"].to_list() == [None]
