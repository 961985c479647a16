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
//! - data pages of 1 MiB (the Parquet default), the unit of page skipping.
//!
//! Target file size (compaction): the table's `delta.targetFileSize`,
//! default 100 MiB (deltalake's default, close to Databricks' 128 MiB for
//! tables below a few TB): files of ~100 MB keep listing and open costs low
//! while leaving enough files for parallel scans.

use deltalake::parquet::basic::{Compression, ZstdLevel};
use deltalake::parquet::file::properties::{EnabledStatistics, WriterProperties};

use crate::error::{Result, ServerError};

/// Rows per Parquet row group.
pub const ROW_GROUP_ROWS: usize = 1 << 20;
/// zstd level of every file.
pub const ZSTD_LEVEL: i32 = 3;

/// Writer properties of every Parquet file Sluice writes.
pub fn writer_properties() -> Result<WriterProperties> {
    Ok(WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(ZSTD_LEVEL)
                .map_err(|e| ServerError::Internal(format!("zstd level: {e}")))?,
        ))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .build())
}
