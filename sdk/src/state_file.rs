//! A persistent stream's local state file: `{"stream_id", "table", "watermark"}` as JSON,
//! rewritten atomically (temporary file, `fsync`, rename, `fsync` of the directory), so a
//! crash leaves the old or the new state, never a torn one. `watermark` is the highest
//! offset this process saw acked (-1: none); the server's own watermark, answered at
//! resume, is authoritative and never lower.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Result, SdkError};

/// What a persistent stream keeps between processes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistentState {
    /// The server's durable stream id.
    pub stream_id: String,
    /// The table the stream writes to.
    pub table: String,
    /// The highest offset seen acked (-1: none).
    pub watermark: i64,
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
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| fail(path, format!("not a state file: {e}"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(fail(path, e)),
    }
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
        };
        save(&path, &s).expect("save");
        s.watermark = 41;
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
    fn a_damaged_state_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("stream.json");
        std::fs::write(&path, b"{\"stream_id\": ").expect("write");
        let e = load(&path).expect_err("damaged");
        assert!(e.to_string().contains("stream.json"), "{e}");
    }
}
