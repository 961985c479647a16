"""Reads a Delta table with Python `deltalake` and `polars` for the Rust
integration tests (which push with the official Rust SDK).

Usage: delta_reader.py LOCATION OUT.arrow
Storage options (e.g. for an S3 server) come as JSON in SLUICE_STORAGE_OPTIONS.

Writes the rows `deltalake` reads as an Arrow IPC file (string/binary/list
views and large variants cast to their plain forms) and prints one JSON line:
the table version, the number of data files, the rows each reader saw, what
polars computes over `id` (sum, distinct count), polars' `[id, _rescued_data]`
pairs ordered by id when the table has that column, the rows with an id at or above
the middle id as each reader reads them through a filter (which the readers
check against each file's Delta stats: a wrong bound skips a file holding such
rows) beside the count of those rows in the full read, the number of commits in
the history, how many of them were retried after losing a race for their
version (`readVersion` < version - 1), and the operations seen. With
SLUICE_POLARS_ROWS=1 also every row as polars reads it, ordered by id
(`polars_row_dicts`; dates and times as text).
"""

import json
import os
import sys

import polars as pl
import pyarrow as pa
import pyarrow.ipc
from deltalake import DeltaTable


def plain(t):
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_large_list(t) or pa.types.is_list_view(t) or pa.types.is_list(t):
        return pa.list_(pa.field(t.value_field.name, plain(t.value_type), t.value_field.nullable))
    if pa.types.is_map(t):
        return pa.map_(plain(t.key_type), pa.field("value", plain(t.item_type), t.item_field.nullable))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, plain(f.type), f.nullable) for f in t])
    return t


def main():
    location, out = sys.argv[1], sys.argv[2]
    options = json.loads(os.environ.get("SLUICE_STORAGE_OPTIONS", "{}"))
    dt = DeltaTable(location, storage_options=options)
    table = dt.to_pyarrow_table()
    schema = pa.schema([pa.field(f.name, plain(f.type), f.nullable) for f in table.schema])
    table = table.cast(schema)
    with pa.ipc.new_file(out, schema) as writer:
        writer.write_table(table)
    df = pl.read_delta(location, storage_options=options)
    has_id = "id" in df.columns
    history = dt.history()
    # A commit whose snapshot was older than the version before it lost a
    # put-if-absent race and was retried at a later version.
    retried = sum(1 for h in history
                  if h.get("readVersion") is not None and h.get("version") is not None
                  and h["readVersion"] < h["version"] - 1)
    rescued = (df.sort("id").select(["id", "_rescued_data"]).rows()
               if has_id and "_rescued_data" in df.columns else None)
    row_dicts = (df.sort("id").to_dicts()
                 if has_id and os.environ.get("SLUICE_POLARS_ROWS") == "1" else None)
    # Reads through a filter on id, which the file stats let the readers prune by.
    middle = int(df["id"].sort()[df.height // 2]) if has_id and df.height else 0
    above = df.filter(pl.col("id") >= middle).height if has_id else 0
    filtered = (dt.to_pyarrow_table(filters=[("id", ">=", middle)]).num_rows
                if has_id else 0)
    polars_filtered = (pl.scan_delta(location, storage_options=options)
                       .filter(pl.col("id") >= middle).collect().height if has_id else 0)
    print(json.dumps({
        "version": dt.version(),
        "files": len(dt.file_uris()),
        "rows": table.num_rows,
        "polars_rows": df.height,
        "polars_id_sum": int(df["id"].sum()) if has_id and df.height else 0,
        "polars_distinct_ids": df["id"].n_unique() if has_id else 0,
        "polars_rescued_data": rescued,
        "ids_at_or_above_middle": above,
        "filtered_rows": filtered,
        "polars_filtered_rows": polars_filtered,
        "commits": len(history),
        "retried_commits": retried,
        "operations": sorted({h.get("operation", "") for h in history}),
        "polars_row_dicts": row_dicts,
    }, default=str))


if __name__ == "__main__":
    main()
