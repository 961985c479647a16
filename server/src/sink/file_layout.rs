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
//!   Beyond it the writer falls back to the column's second encoding, which
//!   zstd then compresses: DELTA_BINARY_PACKED for the top-level integer
//!   columns (those Parquet stores as INT32 or INT64: integers, dates, times,
//!   timestamps, durations), plain for the rest. Ids, sequence numbers and event
//!   times are unique per row;
//!   with the 1 MiB default every such column hashed its first 131 072 values
//!   of each file into a dictionary that was then abandoned — a twentieth of
//!   the pod's perf samples at 200-byte telemetry records (id and timestamp columns),
//!   and a useless 1 MiB dictionary page in every flush file (a 64 KiB one is
//!   still written before the fallback). Low-cardinality
//!   numbers (status codes, sensor ids, enums) stay dictionary-encoded;
//! - DELTA_BINARY_PACKED after the dictionary for integer columns: ids,
//!   offsets and timestamps rise by small steps, which it stores in a few
//!   bits each, where plain encoding left eight bytes a value for zstd, whose
//!   matcher finds only short matches in them (a file of rising ids is under a
//!   quarter of the plain one's size: the tests below). At 200-byte telemetry
//!   records zstd was 7.6 % of the pod's perf samples, 208 of its 338 stacks
//!   on the data pages of primitive columns, and 1.4 % after this (README,
//!   "Integers delta-encoded past their dictionary"). deltalake (arrow-rs), polars and
//!   pyarrow read it in v1 data pages (`tests/python/test_parquet_layout.py`);
//!   Spark's vectorized reader does from 3.3 on (not tested here; an older
//!   Spark only with its non-vectorized reader).
//!
//! Target file size (compaction): the table's `delta.targetFileSize`,
//! default 100 MiB (deltalake's default, close to Databricks' 128 MiB for
//! tables below a few TB): files of ~100 MB keep listing and open costs low
//! while leaving enough files for parallel scans.

use deltalake::arrow::datatypes::{DataType, Schema};
use deltalake::parquet::basic::{Compression, Encoding, ZstdLevel};
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
/// columns, and DELTA_BINARY_PACKED after the dictionary on its top-level
/// integer columns.
pub fn writer_properties_for(schema: &Schema) -> Result<WriterProperties> {
    let builder = schema
        .fields()
        .iter()
        .filter(|f| f.data_type().is_primitive())
        .fold(builder()?, |b, f| {
            let path = || ColumnPath::from(f.name().as_str());
            let b = b.set_column_dictionary_page_size_limit(path(), NUMERIC_DICTIONARY_BYTES);
            if stored_as_integer(f.data_type()) {
                b.set_column_encoding(path(), Encoding::DELTA_BINARY_PACKED)
            } else {
                b
            }
        });
    Ok(builder.build())
}

/// Whether arrow-rs writes a primitive column of `data_type` as Parquet INT32
/// or INT64 (the physical types DELTA_BINARY_PACKED encodes). Decimals are
/// left out: their physical type depends on the writer's choice.
fn stored_as_integer(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Date32
            | DataType::Date64
            | DataType::Time32(_)
            | DataType::Time64(_)
            | DataType::Timestamp(_, _)
            | DataType::Duration(_)
    )
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

    use arrow_array::{
        ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
        TimestampMicrosecondArray, UInt64Array,
    };
    use deltalake::arrow::compute::concat_batches;
    use deltalake::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
    use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use deltalake::parquet::arrow::ArrowWriter;
    use deltalake::parquet::basic::{Encoding, PageType};
    use deltalake::parquet::file::properties::WriterProperties;
    use deltalake::parquet::schema::types::ColumnPath;

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
    fn unique_numbers_leave_the_dictionary_early_and_few_distinct_keep_it() {
        let rows = 50_000i64;
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("sensor", DataType::Int64, false),
            Field::new("device", DataType::Utf8, false),
            Field::new("reading", DataType::Float64, false),
            Field::new(
                "at",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                false,
            ),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(0..rows)),
            Arc::new(Int64Array::from_iter_values((0..rows).map(|i| i % 1000))),
            // 20 000 distinct names of ~12 bytes: over 64 KiB, under the default 1 MiB.
            Arc::new(StringArray::from_iter_values(
                (0..rows).map(|i| format!("device-{:05}", i % 20_000)),
            )),
            Arc::new(Float64Array::from_iter_values(
                (0..rows).map(|i| i as f64 * 0.5),
            )),
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(
                    (0..rows).map(|i| 1_700_000_000_000_000 + i * 1_000),
                )
                .with_timezone("UTC"),
            ),
        ];
        let batch = RecordBatch::try_new(schema, columns).expect("batch");
        let found = data_page_encodings(&batch);
        // The unique integers stop their dictionary after NUMERIC_DICTIONARY_BYTES of
        // values and go on delta-encoded ...
        assert!(
            found[0].contains(&Encoding::DELTA_BINARY_PACKED)
                && !found[0].contains(&Encoding::PLAIN),
            "id: {:?}",
            found[0]
        );
        assert!(
            found[4].contains(&Encoding::DELTA_BINARY_PACKED),
            "at: {:?}",
            found[4]
        );
        // ... unique floats go on plain ...
        assert!(
            found[3].contains(&Encoding::PLAIN),
            "reading: {:?}",
            found[3]
        );
        // ... the one with 1 000 distinct values keeps it for the whole chunk ...
        assert_eq!(found[1], vec![Encoding::RLE_DICTIONARY], "sensor");
        // ... and a string column keeps the default limit (its dictionary of ~300 KB fits).
        assert_eq!(found[2], vec![Encoding::RLE_DICTIONARY], "device");
        // Unique ids of 8 bytes: over the numeric limit, under the 1 MiB default.
        const { assert!(50_000 * 8 > NUMERIC_DICTIONARY_BYTES && 50_000 * 8 < 1 << 20) };
    }

    /// The file of `batch` written with `props`, and read back.
    fn round_trip(batch: &RecordBatch, props: WriterProperties) -> (usize, RecordBatch) {
        let mut out = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).expect("w");
        writer.write(batch).expect("write");
        writer.close().expect("close");
        let bytes = out.len();
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(out))
            .expect("reader")
            .with_batch_size(batch.num_rows())
            .build()
            .expect("build");
        let batches: Vec<RecordBatch> = reader.map(|b| b.expect("batch")).collect();
        let read = concat_batches(&batch.schema(), &batches).expect("concat");
        (bytes, read)
    }

    #[test]
    fn delta_encoded_integers_read_back_equal_and_rising_ones_take_less_room() {
        let rows = 100_000i64;
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("jumps", DataType::Int64, true),
            Field::new("small", DataType::Int32, false),
            Field::new("unsigned", DataType::UInt64, false),
        ]));
        // Rising ids; extremes that overflow a delta (and nulls) both ways; i32 with
        // negative steps; u64 beyond i64::MAX.
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(
                (0..rows).map(|i| 1_000_000 + i),
            )),
            Arc::new(Int64Array::from_iter((0..rows).map(|i| match i % 5 {
                0 => Some(i64::MIN),
                1 => Some(i64::MAX),
                2 => None,
                3 => Some(-i * 7_919),
                _ => Some(i.wrapping_mul(0x9E37_79B9_7F4A_7C15_u64 as i64)),
            }))),
            Arc::new(Int32Array::from_iter_values(
                (0..rows).map(|i| (i as i32).wrapping_mul(-31)),
            )),
            Arc::new(UInt64Array::from_iter_values(
                (0..rows as u64).map(|i| u64::MAX - i * 3),
            )),
        ];
        let batch = RecordBatch::try_new(schema.clone(), columns).expect("batch");
        let props = writer_properties_for(&schema).expect("properties");
        let (_, read) = round_trip(&batch, props);
        assert_eq!(read, batch);

        // A file of rising ids alone: smaller than with plain after the dictionary.
        let ids = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)])),
            vec![batch.column(0).clone()],
        )
        .expect("ids");
        let (delta, _) = round_trip(&ids, writer_properties_for(&ids.schema()).expect("p"));
        let plain_props = super::builder()
            .expect("builder")
            .set_column_dictionary_page_size_limit(ColumnPath::from("id"), NUMERIC_DICTIONARY_BYTES)
            .build();
        let (plain, _) = round_trip(&ids, plain_props);
        assert!(delta * 4 < plain, "delta {delta} bytes, plain {plain}");
    }
}
