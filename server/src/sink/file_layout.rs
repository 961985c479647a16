//! How Sluice lays data out in Parquet, for every file it writes (flushes
//! and compaction):
//!
//! - zstd level 3: close to the best ratio of the fast codecs at a few
//!   hundred MB/s per core, read everywhere (Spark, Trino, DuckDB, polars);
//! - statistics (min, max, null count) per column chunk and page: Parquet
//!   readers skip row groups and pages with them, and deltalake copies the
//!   file-level min/max/nullCount of the first 32 columns into the Add
//!   action, which Delta readers use to skip whole files;
//! - row groups of at most 1 Mi rows: big enough for long sequential reads
//!   and good compression (engines want tens of MB per row group), small
//!   enough that a reader holds one in memory;
//! - data pages of 1 MiB (the Parquet default), the unit of page skipping;
//! - dictionary encoding as long as the dictionary stays small: 1 MiB for
//!   strings and binary (the Parquet default), but [`NUMERIC_DICTIONARY_BYTES`]
//!   (64 KiB: 8 192 distinct 8-byte values per row group) for the top-level
//!   fixed-width numeric columns (integers, floats, decimals, dates, times,
//!   timestamps: Arrow's primitive types).
//!   Beyond it the writer falls back to plain encoding, which zstd then
//!   compresses. Ids, sequence numbers and event times are unique per row;
//!   with the 1 MiB default every such column hashed its first 131 072 values
//!   of each file into a dictionary that was then abandoned — a twentieth of
//!   the pod's perf samples at 200-byte telemetry records (id and timestamp columns),
//!   and a useless 1 MiB dictionary page in every flush file (a 64 KiB one is
//!   still written before the fallback). Low-cardinality
//!   numbers (status codes, sensor ids, enums) stay dictionary-encoded.
//!
//! Target file size (compaction): the table's `delta.targetFileSize`,
//! default 100 MiB (deltalake's default, close to Databricks' 128 MiB for
//! tables below a few TB): files of ~100 MB keep listing and open costs low
//! while leaving enough files for parallel scans.

use deltalake::arrow::datatypes::Schema;
use deltalake::parquet::basic::{Compression, ZstdLevel};
use deltalake::parquet::file::properties::{
    EnabledStatistics, WriterProperties, WriterPropertiesBuilder,
};
use deltalake::parquet::schema::types::ColumnPath;

use crate::error::{Result, ServerError};

/// Rows per Parquet row group.
pub const ROW_GROUP_ROWS: usize = 1 << 20;
/// zstd level of every file.
pub const ZSTD_LEVEL: i32 = 3;

/// Largest dictionary page of a top-level fixed-width numeric column, bytes.
pub const NUMERIC_DICTIONARY_BYTES: usize = 64 * 1024;

/// Writer properties of every Parquet file Sluice writes, for no schema in
/// particular (row-group copies, which encode nothing).
pub fn writer_properties() -> Result<WriterProperties> {
    Ok(builder()?.build())
}

/// Writer properties of the Parquet files of `schema`: [`writer_properties`]
/// with the smaller dictionary limit on its top-level fixed-width numeric
/// columns.
pub fn writer_properties_for(schema: &Schema) -> Result<WriterProperties> {
    let builder = schema
        .fields()
        .iter()
        .filter(|f| f.data_type().is_primitive())
        .fold(builder()?, |b, f| {
            b.set_column_dictionary_page_size_limit(
                ColumnPath::from(f.name().as_str()),
                NUMERIC_DICTIONARY_BYTES,
            )
        });
    Ok(builder.build())
}

fn builder() -> Result<WriterPropertiesBuilder> {
    Ok(WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(ZSTD_LEVEL)
                .map_err(|e| ServerError::Internal(format!("zstd level: {e}")))?,
        ))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS)))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use deltalake::arrow::datatypes::{DataType, Field, Schema};
    use deltalake::parquet::arrow::ArrowWriter;
    use deltalake::parquet::basic::{Encoding, PageType};

    use super::{writer_properties_for, NUMERIC_DICTIONARY_BYTES};

    /// Each column's data-page encodings in one Parquet file of `batch`.
    fn data_page_encodings(batch: &RecordBatch) -> Vec<Vec<Encoding>> {
        let props = writer_properties_for(&batch.schema()).expect("properties");
        let mut out = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).expect("w");
        writer.write(batch).expect("write");
        let metadata = writer.close().expect("close");
        let group = metadata.row_group(0);
        (0..group.num_columns())
            .map(|c| {
                let stats = group
                    .column(c)
                    .page_encoding_stats()
                    .expect("page encoding stats");
                let mut e: Vec<Encoding> = stats
                    .iter()
                    .filter(|s| s.page_type != PageType::DICTIONARY_PAGE)
                    .map(|s| s.encoding)
                    .collect();
                e.sort_by_key(|e| *e as i32);
                e.dedup();
                e
            })
            .collect()
    }

    #[test]
    fn unique_numbers_fall_back_to_plain_early_and_few_distinct_keep_their_dictionary() {
        let rows = 50_000i64;
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("sensor", DataType::Int64, false),
            Field::new("device", DataType::Utf8, false),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(0..rows)),
            Arc::new(Int64Array::from_iter_values((0..rows).map(|i| i % 1000))),
            // 20 000 distinct names of ~12 bytes: over 64 KiB, under the default 1 MiB.
            Arc::new(StringArray::from_iter_values(
                (0..rows).map(|i| format!("device-{:05}", i % 20_000)),
            )),
        ];
        let batch = RecordBatch::try_new(schema, columns).expect("batch");
        let found = data_page_encodings(&batch);
        // The unique column stops its dictionary after NUMERIC_DICTIONARY_BYTES of values...
        assert!(found[0].contains(&Encoding::PLAIN), "id: {:?}", found[0]);
        // ... the one with 1 000 distinct values keeps it for the whole chunk ...
        assert_eq!(found[1], vec![Encoding::RLE_DICTIONARY], "sensor");
        // ... and a string column keeps the default limit (its dictionary of ~300 KB fits).
        assert_eq!(found[2], vec![Encoding::RLE_DICTIONARY], "device");
        // Unique ids of 8 bytes: over the numeric limit, under the 1 MiB default.
        const { assert!(50_000 * 8 > NUMERIC_DICTIONARY_BYTES && 50_000 * 8 < 1 << 20) };
    }
}
