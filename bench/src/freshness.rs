//! Freshness of rows in a local Delta table: for every row committed in a time window, the
//! time from when its producer queued it to the commit that made it visible (the commit's
//! `commitInfo.timestamp` minus the row's send time), read from the table's `_delta_log`
//! JSON commits and the `id` column of the Parquet files each commit added.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result};

use crate::stats::Samples;

/// What one window of a table's log holds.
#[derive(Debug, Default)]
pub struct Window {
    /// Commits that added data in the window.
    pub commits: usize,
    /// Parquet files those commits added.
    pub files: usize,
    /// Bytes of those files.
    pub file_bytes: u64,
    /// Rows in those files.
    pub rows: usize,
    /// Per row: ms from send to the commit holding it (rows whose send time is known).
    pub freshness_ms: Samples,
}

/// Files a commit added: (path relative to the table, size).
type Adds = Vec<(String, u64)>;

/// The data commits of the log: their wall-clock time (ms) and the files they added.
fn data_commits(table_dir: &Path) -> Result<Vec<(i64, Adds)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(table_dir.join("_delta_log"))? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let (time, adds) = commit_adds(&path)?;
        if !adds.is_empty() {
            out.push((time, adds));
        }
    }
    Ok(out)
}

/// One JSON commit's wall-clock time (ms) and the files it added with `dataChange` true
/// (a compaction's adds hold no new rows).
fn commit_adds(path: &Path) -> Result<(i64, Adds)> {
    let (mut time, mut adds) = (0i64, Vec::new());
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    for line in text.lines() {
        let action: serde_json::Value = serde_json::from_str(line)?;
        if let Some(add) = action.get("add") {
            if add["dataChange"].as_bool().unwrap_or(true) {
                let file = add["path"].as_str().context("add without a path")?;
                adds.push((file.to_string(), add["size"].as_u64().unwrap_or(0)));
            }
        }
        if let Some(info) = action.get("commitInfo") {
            time = info["timestamp"].as_i64().unwrap_or(0);
        }
    }
    Ok((time, adds))
}

/// The files version `version` of the table at `table_dir` added with new rows, as paths
/// on disk (a compaction's files are left out: their rows were seen before).
pub fn data_files_of_version(table_dir: &Path, version: i64) -> Result<Vec<std::path::PathBuf>> {
    let (_, adds) = commit_adds(&table_dir.join(format!("_delta_log/{version:020}.json")))?;
    Ok(adds
        .into_iter()
        .map(|(file, _)| table_dir.join(percent_decode(&file)))
        .collect())
}

/// The `id` column of one Parquet file (only that column is read).
pub fn ids_of(path: &Path) -> Result<Vec<i64>> {
    let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?,
    )?;
    let id = parquet::arrow::ProjectionMask::columns(builder.parquet_schema(), ["id"]);
    let reader = builder.with_projection(id).build()?;
    let mut ids = Vec::new();
    for batch in reader {
        let batch = batch?;
        let col = batch
            .column_by_name("id")
            .context("id column")?
            .as_any()
            .downcast_ref::<arrow_array::Int64Array>()
            .context("id is bigint")?;
        ids.extend(col.values().iter().copied());
    }
    Ok(ids)
}

/// Commits of the table at `table_dir` whose time is in `[from_ms, to_ms)`, with the
/// freshness of each of their rows: `sent_ms(id)` is the wall-clock ms the row with `id`
/// was queued by its producer (None: unknown, the row is counted but not timed).
pub fn window(
    table_dir: &Path,
    from_ms: i64,
    to_ms: i64,
    sent_ms: impl Fn(i64) -> Option<f64>,
) -> Result<Window> {
    let mut w = Window::default();
    let mut seen: HashMap<String, ()> = HashMap::new();
    for (time, adds) in data_commits(table_dir)? {
        if time < from_ms || time >= to_ms {
            continue;
        }
        w.commits += 1;
        for (file, size) in adds {
            if seen.insert(file.clone(), ()).is_some() {
                continue;
            }
            w.files += 1;
            w.file_bytes += size;
            let decoded = percent_decode(&file);
            for id in ids_of(&table_dir.join(decoded))? {
                w.rows += 1;
                if let Some(sent) = sent_ms(id) {
                    w.freshness_ms.push(time as f64 - sent);
                }
            }
        }
    }
    Ok(w)
}

/// Add paths are URL-encoded (`%20` …); files on disk are not.
fn percent_decode(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_paths_are_percent_decoded() {
        assert_eq!(
            percent_decode("date=2026-12-04/part%20a.parquet"),
            "date=2026-12-04/part a.parquet"
        );
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("plain.parquet"), "plain.parquet");
    }

    #[test]
    fn a_window_counts_only_its_commits_and_times_each_row() {
        use std::sync::Arc;
        let dir = std::env::temp_dir().join(format!("freshness-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let log = dir.join("_delta_log");
        std::fs::create_dir_all(&log).expect("log dir");
        for (name, ids) in [("a.parquet", vec![1i64, 2]), ("b.parquet", vec![3i64])] {
            let col: arrow_array::ArrayRef = Arc::new(arrow_array::Int64Array::from(ids));
            let batch = arrow_array::RecordBatch::try_from_iter([("id", col)]).expect("batch");
            let file = std::fs::File::create(dir.join(name)).expect("file");
            let mut w =
                parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).expect("writer");
            w.write(&batch).expect("write");
            w.close().expect("close");
        }
        let commit = |n: u32, time: i64, path: &str| {
            let add = serde_json::json!({"add": {"path": path, "size": 10, "dataChange": true}});
            let info = serde_json::json!({"commitInfo": {"timestamp": time}});
            std::fs::write(
                log.join(format!("{n:020}.json")),
                format!("{add}\n{info}\n"),
            )
            .expect("commit");
        };
        commit(1, 1_000, "a.parquet");
        commit(2, 5_000, "b.parquet");
        let w = window(&dir, 0, 2_000, |id| Some(100.0 * id as f64)).expect("window");
        assert_eq!((w.commits, w.files, w.rows, w.file_bytes), (1, 1, 2, 10));
        let mut f = w.freshness_ms;
        assert_eq!(f.len(), 2);
        assert_eq!(f.quantile(1.0), 900.0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
