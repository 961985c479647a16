"""What the readers installed here (Python `deltalake` 1.6.6, `polars` 2.1.0) do with the
Delta features that `sluice table alter --widen / --drop-columns / --rename-column` would
need. Sluice refuses those changes (its writer, deltalake-core 1.1.3, cannot write such
tables); these tests pin down the second reason, the readers: a table with the
`typeWidening` feature is refused by both, and a column-mapping (mode name) table is
refused by polars and read as all NULL by deltalake. The tables are built by hand (no
Spark here): a commit of a table written by `write_deltalake`, or a Parquet file whose
columns carry the physical names (and Parquet field ids), plus the log JSON a writer with
the feature would write. If a reader starts to support a feature, its test fails: then the
README's "Evolving a table" section and `evolve::plan::WRITER_LIMIT` need a new look.

The way Sluice does take those changes, `--rewrite` (every data file written again under the
new schema, no table feature), is read by both: the last test alters a real Sluice table.
"""

import json
import os
import uuid

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake


def commit(path, version, actions):
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json"), "w") as f:
        for action in actions:
            f.write(json.dumps(action) + "\n")


def metadata(table_id, fields, configuration):
    return {"metaData": {"id": table_id, "format": {"provider": "parquet", "options": {}},
                         "schemaString": json.dumps({"type": "struct", "fields": fields}),
                         "partitionColumns": [], "configuration": configuration,
                         "createdTime": 0}}


def test_a_widened_column_is_refused_by_both_readers(tmp_path):
    path = str(tmp_path / "widened")
    write_deltalake(path, pa.table({"id": pa.array([1, 2], pa.int64()),
                                    "n": pa.array([1, 2], pa.int32())}))
    table_id = DeltaTable(path).metadata().id
    fields = [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "n", "type": "long", "nullable": True,
         "metadata": {"delta.typeChanges": [{"fromType": "integer", "toType": "long"}]}},
    ]
    commit(path, 1, [
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                      "readerFeatures": ["typeWidening"], "writerFeatures": ["typeWidening"]}},
        metadata(table_id, fields, {"delta.enableTypeWidening": "true"}),
        {"commitInfo": {"operation": "CHANGE COLUMN"}},
    ])
    with pytest.raises(Exception, match="typeWidening.*not yet supported by the deltalake reader"):
        DeltaTable(path).to_pyarrow_table()
    with pytest.raises(Exception, match=r"requires reader features \['typeWidening'\], which polars does not support"):
        pl.read_delta(path)


def test_a_column_mapped_table_is_refused_by_polars_and_read_as_nulls_by_deltalake(tmp_path):
    path = str(tmp_path / "mapped")
    os.makedirs(os.path.join(path, "_delta_log"))
    schema = pa.schema([
        pa.field("col-a", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
        pa.field("col-b", pa.float64(), metadata={b"PARQUET:field_id": b"2"}),
    ])
    pq.write_table(pa.table({"col-a": [1, 2], "col-b": [1.5, 2.5]}, schema=schema),
                   os.path.join(path, "part-0.parquet"))
    size = os.path.getsize(os.path.join(path, "part-0.parquet"))

    def field(name, type_, column_id, physical):
        return {"name": name, "type": type_, "nullable": True,
                "metadata": {"delta.columnMapping.id": column_id,
                             "delta.columnMapping.physicalName": physical}}

    table_id = str(uuid.uuid4())
    config = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "2"}
    commit(path, 0, [
        {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}},
        metadata(table_id, [field("id", "long", 1, "col-a"), field("temp", "double", 2, "col-b")],
                 config),
        {"add": {"path": "part-0.parquet", "partitionValues": {}, "size": size,
                 "modificationTime": 0, "dataChange": True}},
    ])
    # A rename is a metadata change of the logical name only.
    commit(path, 1, [
        metadata(table_id, [field("id", "long", 1, "col-a"), field("celsius", "double", 2, "col-b")],
                 config),
        {"commitInfo": {"operation": "RENAME COLUMN"}},
    ])
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    assert rows == [{"id": None, "celsius": None}, {"id": None, "celsius": None}], rows
    with pytest.raises(Exception, match=r"requires reader version 2 \(column mapping\), which polars does not support"):
        pl.read_delta(path)


def sluice_cli(server, *args):
    """Runs `sluice ARGS` against `server` with the admin credentials; returns stdout."""
    import subprocess

    from conftest import CLIENT_ID, CLIENT_SECRET

    env = dict(os.environ, SLUICE_CLIENT_ID=CLIENT_ID, SLUICE_CLIENT_SECRET=CLIENT_SECRET)
    binary = os.environ.get("SLUICE_BIN", "target/debug/sluice")
    env["SLUICE_SERVER"] = server.url
    out = subprocess.run([binary, *args], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def json_table(server, name, columns):
    """Creates table NAME (COLUMNS) through the CLI; returns its location and a function
    that opens a JSON stream of the official Python SDK on it."""
    from conftest import CLIENT_ID, CLIENT_SECRET, plain_sdk
    from zerobus import TableProperties
    from zerobus.sdk.shared import RecordType, StreamConfigurationOptions

    sluice_cli(server, "table", "create", name, "--columns", columns)
    location = server.api("GET", "/" + name)["storage_location"]
    sdk = plain_sdk(server)
    options = StreamConfigurationOptions(record_type=RecordType.JSON)
    return location, lambda: sdk.create_stream(CLIENT_ID, CLIENT_SECRET, TableProperties(name),
                                                options)


def test_a_table_altered_with_rewrite_is_read_by_both_readers(server):
    """`sluice table alter --rewrite` (widen, drop; then rename through PATCH) on a Sluice
    table with rows in several files: both readers read every row under the new schema,
    and every live data file was written under it (no old file left in the table)."""
    import time

    name = "main.py.rewritten"
    location, open_stream = json_table(
        server, name, "id BIGINT NOT NULL, device STRING, temp FLOAT, n INT, note STRING")
    stream = open_stream()
    for part in range(3):
        for i in range(part * 100, part * 100 + 100):
            stream.ingest_record_offset(json.dumps(
                {"id": i, "device": f"d{i % 7}", "temp": i + 0.25, "n": i * 1000, "note": "x"}))
        stream.flush()
        deadline = time.time() + 30
        while DeltaTable(location).to_pyarrow_table().num_rows < part * 100 + 100:
            assert time.time() < deadline
            time.sleep(0.1)
    stream.close()
    files_before = len(DeltaTable(location).file_uris())
    assert files_before >= 3

    sluice_cli(server, "table", "alter", name, "--widen", "temp FLOAT TO DOUBLE",
               "--widen", "n INT TO BIGINT", "--drop-columns", "note", "--rewrite")
    info = server.api("PATCH", "/" + name, {"rename_column": "device TO sensor", "rewrite": True})
    assert [c["name"] for c in info["columns"]] == ["id", "sensor", "temp", "n"]

    stream = open_stream()
    stream.ingest_record_offset(json.dumps(
        {"id": 1000, "sensor": "new", "temp": 1e300, "n": 2 ** 40}))
    stream.flush()
    stream.close()
    deadline = time.time() + 30
    while DeltaTable(location).to_pyarrow_table().num_rows < 301:
        assert time.time() < deadline
        time.sleep(0.1)

    table = DeltaTable(location)
    arrow = table.to_pyarrow_table().sort_by("id")
    assert arrow.schema.names == ["id", "sensor", "temp", "n"]
    assert arrow.schema.field("temp").type == pa.float64()
    assert arrow.schema.field("n").type == pa.int64()
    frame = pl.read_delta(location).sort("id")
    assert frame.columns == ["id", "sensor", "temp", "n"]
    assert frame.schema["temp"] == pl.Float64
    want_ids = list(range(300)) + [1000]
    assert arrow.column("id").to_pylist() == want_ids
    assert frame["id"].to_list() == want_ids
    assert frame["sensor"].to_list() == [f"d{i % 7}" for i in range(300)] + ["new"]
    assert frame["temp"].to_list() == [i + 0.25 for i in range(300)] + [1e300]
    assert frame["n"].to_list() == [i * 1000 for i in range(300)] + [2 ** 40]
    assert arrow.column("sensor").to_pylist() == frame["sensor"].to_list()
    # Every live file was written under the new schema: no `note`, DOUBLE `temp`.
    for uri in table.file_uris():
        schema = pq.read_schema(uri.removeprefix("file://"))
        assert "note" not in schema.names and "device" not in schema.names, uri
        assert schema.field("temp").type == pa.float64(), uri
    history = [h["operation"] for h in table.history()]
    assert history.count("WRITE") >= 2, history


def test_a_partitioned_table_altered_with_rewrite_keeps_its_partitions(server, tmp_path):
    """`--rewrite` on a partitioned Delta table (attached with `--location`): a widen, a
    drop and a rename of non-partition columns; every row reads back exactly through both
    readers, and every new file stays in its partition (its `add` carries the partition
    value, its path is under `day=…/`)."""
    location = str(tmp_path / "parted")
    for part in range(3):
        ids = list(range(part * 10, part * 10 + 10))
        write_deltalake(location, pa.table({
            "id": pa.array(ids, pa.int64()),
            "device": pa.array([f"d{i % 3}" for i in ids], pa.string()),
            "temp": pa.array([i + 0.5 for i in ids], pa.float32()),
            "note": pa.array(["x"] * 10, pa.string()),
            "day": pa.array([f"2026-12-0{1 + i % 2}" for i in ids], pa.string()),
        }), partition_by=["day"], mode="append")
    files_before = set(DeltaTable(location).file_uris())
    assert len(files_before) == 6, files_before
    name = "main.py.parted"
    sluice_cli(server, "table", "create", name, "--columns",
               "id BIGINT, device STRING, temp FLOAT, note STRING, day STRING",
               "--location", location)

    sluice_cli(server, "table", "alter", name, "--widen", "temp FLOAT TO DOUBLE",
               "--drop-columns", "note", "--rewrite")
    sluice_cli(server, "table", "alter", name, "--rename-column", "device TO sensor",
               "--rewrite")

    table = DeltaTable(location)
    assert table.metadata().partition_columns == ["day"]
    arrow = table.to_pyarrow_table().sort_by("id")
    frame = pl.read_delta(location).sort("id")
    names = ["id", "sensor", "temp", "day"]
    assert arrow.schema.names == names and frame.columns == names
    assert arrow.schema.field("temp").type == pa.float64()
    want = [{"id": i, "sensor": f"d{i % 3}", "temp": i + 0.5, "day": f"2026-12-0{1 + i % 2}"}
            for i in range(30)]
    assert arrow.to_pylist() == want
    assert frame.to_dicts() == want
    files = set(table.file_uris())
    assert files and not files & files_before, (files, files_before)
    adds = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    for add in adds:
        day = add["partition.day"]
        assert add["path"].startswith(f"day={day}/"), add
        rows = pq.read_table(os.path.join(location, add["path"])).to_pylist()
        assert rows and all(r["id"] % 2 == int(day[-1]) - 1 for r in rows), (add, rows)
        assert "day" not in pq.read_schema(os.path.join(location, add["path"])).names


def test_a_date_widened_to_timestamp_ntz_with_rewrite_reads_back_at_midnight(server):
    """`--widen "d DATE TO TIMESTAMP_NTZ" --rewrite` on a Sluice table (created with a
    TIMESTAMP_NTZ column, so its protocol has `timestampNtz`): rows streamed before read back
    as that day at 00:00, a row streamed after with a microsecond timestamp keeps it, through
    both readers; every live file has the TIMESTAMP_NTZ column."""
    import datetime
    import time

    name = "main.py.dated"
    location, open_stream = json_table(server, name, "id BIGINT NOT NULL, d DATE, seen TIMESTAMP_NTZ")

    def send(records, rows):
        stream = open_stream()
        for record in records:
            stream.ingest_record_offset(json.dumps(record))
        stream.flush()
        stream.close()
        deadline = time.time() + 30
        while DeltaTable(location).to_pyarrow_table().num_rows < rows:
            assert time.time() < deadline
            time.sleep(0.1)

    day0 = datetime.date(2026, 12, 1)
    send([{"id": i, "d": (day0 + datetime.timedelta(days=i)).isoformat(), "seen": i}
          for i in range(10)], 10)
    send([{"id": 10, "d": None, "seen": None}], 11)
    sluice_cli(server, "table", "alter", name, "--widen", "d DATE TO TIMESTAMP_NTZ", "--rewrite")
    late = datetime.datetime(2026, 12, 5, 1, 2, 3, 456789)
    late_us = (late - datetime.datetime(1970, 1, 1)) // datetime.timedelta(microseconds=1)
    send([{"id": 11, "d": late_us, "seen": late_us}], 12)

    want = [datetime.datetime.combine(day0 + datetime.timedelta(days=i), datetime.time())
            for i in range(10)] + [None, late]
    table = DeltaTable(location)
    arrow = table.to_pyarrow_table().sort_by("id")
    assert arrow.schema.field("d").type == pa.timestamp("us")
    assert arrow.column("d").to_pylist() == want
    frame = pl.read_delta(location).sort("id")
    assert frame.schema["d"] == pl.Datetime("us")
    assert frame["d"].to_list() == want
    assert frame["id"].to_list() == list(range(12))
    for uri in table.file_uris():
        schema = pq.read_schema(uri.removeprefix("file://"))
        assert schema.field("d").type == pa.timestamp("us"), uri

    # Without a TIMESTAMP_NTZ column the table's protocol lacks `timestampNtz`: refused.
    import urllib.error

    sluice_cli(server, "table", "create", "main.py.undated", "--columns", "id BIGINT, d DATE")
    with pytest.raises(urllib.error.HTTPError) as refused:
        server.api("PATCH", "/main.py.undated",
                   {"widen": ["d DATE TO TIMESTAMP_NTZ"], "rewrite": True})
    body = json.load(refused.value)
    assert refused.value.code == 501 and body["error_code"] == "NOT_IMPLEMENTED", body
    assert "needs the Delta table feature timestampNtz" in body["message"], body
