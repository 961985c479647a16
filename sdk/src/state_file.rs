//! A persistent stream's local state file: `{"stream_id", "table", "watermark", "cuts"}`
//! as JSON, rewritten atomically (temporary file, `fsync`, rename, `fsync` of the
//! directory), so a crash leaves the old or the new state, never a torn one. `watermark`
//! is the highest record offset this process saw acked (-1: none); `cuts` is the batch
//! plan ([`crate::plan`]) that maps the server's watermark (a request number, answered at
//! resume, authoritative and never lower) back to a record. A file without `cuts` (one
//! record per request, as the SDK wrote before batching) means request = record.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Result, SdkError};
use crate::plan::{Cut, Plan};

/// What a persistent stream keeps between processes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistentState {
    /// The server's durable stream id.
    pub stream_id: String,
    /// The table the stream writes to.
    pub table: String,
    /// The highest offset seen acked (-1: none).
    pub watermark: i64,
    /// The batch plan's cuts, base first (empty: one record per request).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cuts: Vec<Cut>,
}

impl PersistentState {
    /// The batch plan this state holds.
    pub fn plan(&self) -> std::result::Result<Plan, String> {
        if self.cuts.is_empty() {
            return Ok(Plan::new(self.watermark, self.watermark, 1));
        }
        Plan::from_cuts(self.cuts.clone())
    }
}

fn fail(path: &Path, message: impl ToString) -> SdkError {
    SdkError::State {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

/// Reads the state at `path` (`None`: no file yet).
pub fn load(path: &Path) -> Result<Option<PersistentState>> {
    match std::fs::read(path) {
        Ok(bytes) => parse(&bytes).map(Some).map_err(|e| fail(path, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(fail(path, e)),
    }
}

/// Parses a state file's bytes; its batch plan must be consistent.
pub fn parse(bytes: &[u8]) -> std::result::Result<PersistentState, String> {
    let state: PersistentState =
        serde_json::from_slice(bytes).map_err(|e| format!("not a state file: {e}"))?;
    state.plan().map_err(|e| format!("not a state file: {e}"))?;
    Ok(state)
}

/// Replaces the state at `path` atomically.
pub fn save(path: &Path, state: &PersistentState) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let json = serde_json::to_vec(state).map_err(|e| fail(path, e))?;
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&json)?;
        f.sync_data()?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(&dir)?.sync_all()
    };
    write().map_err(|e| fail(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_and_is_replaced_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("stream.json");
        assert_eq!(load(&path).ok(), Some(None));
        let mut s = PersistentState {
            stream_id: "abc".into(),
            table: "main.a.b".into(),
            watermark: -1,
            cuts: Vec::new(),
        };
        save(&path, &s).expect("save");
        s.watermark = 41;
        s.cuts = Plan::new(3, 41, 10).cuts().to_vec();
        save(&path, &s).expect("save again");
        assert_eq!(load(&path).ok().flatten(), Some(s));
        assert!(!dir.path().join("stream.json.tmp").exists());
    }

    proptest::proptest! {
        #[test]
        fn any_file_content_loads_or_is_refused_without_panicking(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("s.json");
            std::fs::write(&path, &bytes).expect("write");
            let _ = load(&path);
        }
    }

    #[test]
    fn a_file_without_cuts_maps_requests_to_records_one_to_one() {
        let old = br#"{"stream_id":"a","table":"main.a.b","watermark":7}"#;
        let plan = parse(old).expect("old format").plan().expect("plan");
        assert_eq!(plan.last_seq_of(9), Some(9));
        let bad = br#"{"stream_id":"a","table":"t","watermark":7,"cuts":[{"wire":1,"last_seq":5,"batch":0}]}"#;
        assert!(parse(bad).is_err(), "an inconsistent plan is refused");
    }

    #[test]
    fn a_damaged_state_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("stream.json");
        std::fs::write(&path, b"{\"stream_id\": ").expect("write");
        let e = load(&path).expect_err("damaged");
        assert!(e.to_string().contains("stream.json"), "{e}");
    }
}
