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
