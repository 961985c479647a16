//! Compaction without re-encoding: a bin whose files share one Parquet schema
//! and hold only large row groups becomes one file by copying their column
//! chunks byte for byte (pages, statistics, page indexes), so the rows are
//! neither decoded nor compressed again. A flush at a high rate already
//! writes row groups of ~10⁵ rows; re-encoding them cost about a fifth of the
//! pod's CPU in `trunk-bench` (README, issue 16). Bins with small row groups
//! (a slow table's flushes) are still re-encoded, which merges them into
//! large ones. The new file's Delta stats are the inputs' merged
//! ([`super::stats_merge`]).

use std::sync::Arc;

use bytes::Bytes;
use deltalake::kernel::Add;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::column::writer::ColumnCloseResult;
use parquet::errors::ParquetError;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};
use parquet::file::writer::SerializedFileWriter;

use crate::error::{Result, ServerError};
use crate::sink::file_layout::writer_properties;

/// Which row groups are kept as they are: at least `min_rows` rows or `min_bytes` bytes
/// before compression. A bin is copied only if every row group of every file is.
#[derive(Debug, Clone, Copy)]
pub struct CopyRule {
    /// Rows that make a row group large.
    pub min_rows: i64,
    /// Uncompressed bytes that make a row group large.
    pub min_bytes: i64,
}

/// The rule compaction uses: 64 Ki rows or 8 MiB.
pub const COPY_RULE: CopyRule = CopyRule {
    min_rows: 64 << 10,
    min_bytes: 8 << 20,
};

/// One file of a bin.
pub struct BinFile<'a> {
    /// Where it is, under the table's root.
    pub path: &'a Path,
    /// Its size in bytes.
    pub size: i64,
}

/// Whether `files` can be copied into one file: same Parquet schema and Arrow schema
/// metadata, every row group large by `rule`. Reads only the footers.
pub async fn copyable(
    store: &Arc<dyn ObjectStore>,
    files: &[BinFile<'_>],
    rule: &CopyRule,
) -> Result<bool> {
    let mut first: Option<ParquetMetaData> = None;
    for f in files {
        let meta = footer(store, f).await?;
        let large = meta
            .row_groups()
            .iter()
            .all(|rg| rg.num_rows() >= rule.min_rows || rg.total_byte_size() >= rule.min_bytes);
        if !large {
            return Ok(false);
        }
        match &first {
            None => first = Some(meta),
            Some(m) => {
                let same = m.file_metadata().schema() == meta.file_metadata().schema()
                    && m.file_metadata().key_value_metadata()
                        == meta.file_metadata().key_value_metadata();
                if !same {
                    return Ok(false);
                }
            }
        }
    }
    Ok(first.is_some())
}

/// Bytes read from a file's end for its footer at first (more if the footer needs it).
const FOOTER_GUESS: u64 = 64 << 10;

/// The footer of `f`, read from its tail.
async fn footer(store: &Arc<dyn ObjectStore>, f: &BinFile<'_>) -> Result<ParquetMetaData> {
    let size = f.size as u64;
    let mut want = FOOTER_GUESS.min(size);
    loop {
        let tail = store
            .get_range(f.path, size - want..size)
            .await
            .map_err(|e| read_error(f.path, e))?;
        let mut reader = ParquetMetaDataReader::new();
        match reader.try_parse_sized(&tail, size) {
            Ok(()) => return reader.finish().map_err(|e| read_error(f.path, e)),
            Err(ParquetError::NeedMoreData(needed)) if (needed as u64) > want => {
                want = (needed as u64).min(size);
            }
            Err(e) => return Err(read_error(f.path, e)),
        }
    }
}

/// Copies every row group of `files`, in order, into one new Parquet file under the
/// table's root; returns its Add (`dataChange` false, `stats` as given).
pub async fn copy(
    store: &Arc<dyn ObjectStore>,
    files: &[BinFile<'_>],
    stats: Option<String>,
) -> Result<Add> {
    // Sized for every input at once: the copy never moves what it has written.
    let capacity: i64 = files.iter().map(|f| f.size).sum();
    let mut writer: Option<SerializedFileWriter<Vec<u8>>> = None;
    for f in files {
        let bytes = store
            .get(f.path)
            .await
            .map_err(|e| read_error(f.path, e))?
            .bytes()
            .await
            .map_err(|e| read_error(f.path, e))?;
        // Parsing the footer and copying ~10⁷ bytes run on the blocking pool, never on a
        // worker that streams' acks are queued on.
        let (path, out) = (f.path.clone(), writer.take());
        let appended = tokio::task::spawn_blocking(move || {
            let meta = ParquetMetaDataReader::new()
                .with_page_index_policy(PageIndexPolicy::Optional)
                .parse_and_finish(&bytes)
                .map_err(|e| read_error(&path, e))?;
            let mut out = match out {
                Some(w) => w,
                None => new_writer(&meta, capacity.max(0) as usize)?,
            };
            append_row_groups(&mut out, &bytes, &meta).map_err(|e| read_error(&path, e))?;
            Ok::<_, ServerError>(out)
        })
        .await
        .map_err(|e| ServerError::Internal(format!("row-group copy task: {e}")))??;
        writer = Some(appended);
    }
    let writer =
        writer.ok_or_else(|| ServerError::Internal("row-group copy of no files".into()))?;
    let data = tokio::task::spawn_blocking(move || writer.into_inner())
        .await
        .map_err(|e| ServerError::Internal(format!("row-group copy task: {e}")))?
        .map_err(|e| ServerError::Internal(format!("closing a compacted file: {e}")))?;
    let path = format!("part-00000-{}-c000.zstd.parquet", uuid::Uuid::new_v4());
    let size = data.len() as i64;
    store
        .put(&Path::from(path.as_str()), data.into())
        .await
        .map_err(|e| ServerError::Internal(format!("writing {path}: {e}")))?;
    Ok(Add {
        path,
        partition_values: Default::default(),
        size,
        modification_time: chrono::Utc::now().timestamp_millis(),
        data_change: false,
        stats,
        tags: None,
        deletion_vector: None,
        base_row_id: None,
        default_row_commit_version: None,
        clustering_provider: None,
    })
}

/// A writer (into a buffer of `capacity` bytes) of the schema, Arrow schema and other
/// key-value metadata of `like`.
fn new_writer(like: &ParquetMetaData, capacity: usize) -> Result<SerializedFileWriter<Vec<u8>>> {
    let schema = like.file_metadata().schema_descr().root_schema_ptr();
    let buffer = Vec::with_capacity(capacity);
    let mut w = SerializedFileWriter::new(buffer, schema, Arc::new(writer_properties()?))
        .map_err(|e| ServerError::Internal(format!("compacted file: {e}")))?;
    for kv in like
        .file_metadata()
        .key_value_metadata()
        .into_iter()
        .flatten()
    {
        w.append_key_value_metadata(kv.clone());
    }
    Ok(w)
}

/// Appends every row group of the file in `bytes` (footer `meta`) to `out`.
fn append_row_groups(
    out: &mut SerializedFileWriter<Vec<u8>>,
    bytes: &Bytes,
    meta: &ParquetMetaData,
) -> parquet::errors::Result<()> {
    for (g, rg) in meta.row_groups().iter().enumerate() {
        let column_index = meta.column_index().and_then(|c| c.get(g));
        let offset_index = meta.offset_index().and_then(|o| o.get(g));
        let mut group = out.next_row_group()?;
        for (c, column) in rg.columns().iter().enumerate() {
            group.append_column(
                bytes,
                ColumnCloseResult {
                    bytes_written: column.compressed_size() as u64,
                    rows_written: rg.num_rows() as u64,
                    metadata: column.clone(),
                    bloom_filter: None,
                    column_index: column_index.and_then(|i| i.get(c)).cloned(),
                    offset_index: offset_index.and_then(|i| i.get(c)).cloned(),
                },
            )?;
        }
        group.close()?;
    }
    Ok(())
}

fn read_error(path: &Path, e: impl std::fmt::Display) -> ServerError {
    ServerError::Internal(format!("reading {path}: {e}"))
}
