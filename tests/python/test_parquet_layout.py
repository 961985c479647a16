"""The Parquet layout of a flush file, read by the readers data teams use.

Contract under test: integer columns past their dictionary (8 192 distinct values) go on
delta-encoded (DELTA_BINARY_PACKED) and floats plain, and Python `deltalake`, `polars` and
`pyarrow` read every value back, the extremes of the type included.
"""

import glob
import json
import os

import polars as pl
import pyarrow.parquet as pq
import requests
from deltalake import DeltaTable

from test_rest import ids_in_delta

ROWS = 30_000
TABLE = "main.layout.t"
COLUMNS = [
    {"name": "id", "type_text": "bigint", "type_name": "LONG", "nullable": False},
    {"name": "step", "type_text": "int", "type_name": "INT", "nullable": True},
    {"name": "big", "type_text": "bigint", "type_name": "LONG", "nullable": True},
    {"name": "temp", "type_text": "double", "type_name": "DOUBLE", "nullable": True},
]
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


def row(i):
    """Rising ids; an int column that falls by 31 each row; a bigint column whose
    neighbours overflow a 64-bit delta both ways (and nulls); unique floats."""
    big = [I64_MIN, I64_MAX, None, -i * 7_919, i * 1_000_003][i % 5]
    return {"id": 10_000_000 + i, "step": -31 * i, "big": big, "temp": i * 0.25}


def test_integers_past_the_dictionary_are_delta_encoded_and_read_back_by_every_reader(server):
    location = server.api("POST", "", {"name": TABLE, "columns": COLUMNS})["storage_location"]
    body = "\n".join(json.dumps(row(i)) for i in range(ROWS)) + "\n"
    r = requests.post(f"{server.url}/zerobus/v1/tables/{TABLE}/insert", data=body, timeout=60,
                      headers={"Authorization": "Bearer " + server.token(),
                               "Content-Type": "application/x-ndjson"})
    assert r.status_code == 200, r.text
    assert len(ids_in_delta(location, ROWS)) == ROWS

    expected = [row(i) for i in range(ROWS)]
    df = pl.read_delta(location).sort("id")
    assert df.select(["id", "step", "big", "temp"]).to_dicts() == expected
    arrow = DeltaTable(location).to_pyarrow_table().sort_by("id")
    assert arrow.select(["id", "step", "big", "temp"]).to_pylist() == expected

    files = glob.glob(os.path.join(location.removeprefix("file://"), "*.parquet"))
    encodings = {}
    for f in files:
        meta = pq.ParquetFile(f).metadata
        assert pq.read_table(f).num_rows == meta.num_rows
        for g in range(meta.num_row_groups):
            for c in range(meta.row_group(g).num_columns):
                chunk = meta.row_group(g).column(c)
                encodings.setdefault(chunk.path_in_schema, set()).update(chunk.encodings)
    # One request, one run: its rows are in one file, whose integer columns outgrow the
    # dictionary.
    for column in ("id", "step", "big"):
        assert "DELTA_BINARY_PACKED" in encodings[column], (column, encodings[column])
    assert "DELTA_BINARY_PACKED" not in encodings["temp"], encodings["temp"]
    assert "PLAIN" in encodings["temp"], encodings["temp"]
