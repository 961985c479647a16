//! The `(id BIGINT NOT NULL, note STRING)` test table: the JSON record for an id, and reading
//! the table back with Python `polars` (over `deltalake`) from the project's virtualenv, so
//! this crate need not compile the `deltalake` crate a second time.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use databricks_zerobus_ingest_sdk::JsonString;

use crate::HarnessError;

/// The columns of the test table.
pub const NOTES_COLUMNS: &str = "id BIGINT NOT NULL, note STRING";

/// The JSON record `{"id": id, "note": "n<id>"}`.
pub fn note(id: i64) -> JsonString {
    JsonString(serde_json::json!({"id": id, "note": format!("n{id}")}).to_string())
}

/// The rows [`note`] gives for `ids`, as [`NotesTable::rows_by_id`] lists them.
pub fn expected_notes(ids: std::ops::Range<i64>) -> Vec<(i64, String)> {
    ids.map(|id| (id, format!("n{id}"))).collect()
}

/// Prints `{"rows": n, "distinct_ids": d, "rows_by_id": [[id, note], ...]}` for the table at
/// argv[1] (columns `id`, `note`), sorted by id.
const READER: &str = r#"
import json, sys
import polars as pl
df = pl.read_delta(sys.argv[1]).sort("id")
print(json.dumps({
    "rows": df.height,
    "distinct_ids": df["id"].n_unique(),
    "rows_by_id": [[i, n] for i, n in zip(df["id"].to_list(), df["note"].to_list())],
}))
"#;

/// The Python interpreter: `$SLUICE_PYTHON`, else the repository's `.venv`.
pub fn python() -> PathBuf {
    std::env::var_os("SLUICE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python"))
}

/// What polars reads from an `(id BIGINT, note STRING)` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotesTable {
    /// Number of rows.
    pub rows: u64,
    /// Number of distinct ids.
    pub distinct_ids: u64,
    /// Every `(id, note)` row, sorted by id.
    pub rows_by_id: Vec<(i64, String)>,
}

/// Reads the `(id, note)` table at `location` once.
pub fn read_notes(location: &str) -> Result<NotesTable, HarnessError> {
    let out = Command::new(python())
        .args(["-c", READER, location])
        .output()
        .map_err(HarnessError::io(format!("run {}", python().display())))?;
    if !out.status.success() {
        return Err(HarnessError::Reader(
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| HarnessError::Reader(format!("not JSON ({e})")))?;
    let count = |key: &str| {
        v[key]
            .as_u64()
            .ok_or_else(|| HarnessError::Reader(format!("no `{key}` in {v}")))
    };
    let rows_by_id = v["rows_by_id"]
        .as_array()
        .ok_or_else(|| HarnessError::Reader(format!("no `rows_by_id` in {v}")))?
        .iter()
        .map(|pair| match (pair[0].as_i64(), pair[1].as_str()) {
            (Some(id), Some(note)) => Ok((id, note.to_string())),
            _ => Err(HarnessError::Reader(format!("bad row {pair}"))),
        })
        .collect::<Result<_, _>>()?;
    Ok(NotesTable {
        rows: count("rows")?,
        distinct_ids: count("distinct_ids")?,
        rows_by_id,
    })
}

/// Reads the table at `location` until it holds at least `rows` rows (the server commits
/// acked records at its flush interval) or `timeout` passes; returns the last read.
pub async fn read_notes_when(
    location: &str,
    rows: u64,
    timeout: Duration,
) -> Result<NotesTable, HarnessError> {
    let deadline = Instant::now() + timeout;
    loop {
        let table = read_notes(location)?;
        if table.rows >= rows || Instant::now() >= deadline {
            return Ok(table);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
