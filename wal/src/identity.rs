//! The log's stable identity: a random id created on the first open and kept in
//! `{dir}/wal-id`. The server uses it as the Delta `txn` app id, so it must never change
//! while the log's segments exist: a log with segments but no id refuses to open rather than
//! invent a new identity (which would make every table replay the whole log again).

use std::path::Path;

use crate::error::{Result, WalError};
use crate::fs;

/// File holding the id, one line of lowercase hex.
pub(crate) const ID_FILE: &str = "wal-id";
/// Random bytes in a new id (rendered as twice as many hex digits).
const ID_BYTES: usize = 16;

/// Reads the id, or creates it (durably) if this directory holds no log yet.
pub(crate) fn load_or_create(dir: &Path, has_segments: bool) -> Result<String> {
    let path = dir.join(ID_FILE);
    if let Some(text) = fs::read_to_string_if_exists(&path)? {
        let id = text.trim();
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return Err(WalError::corrupt(
                &path,
                0,
                "the log id must be a non-empty line of letters, digits and dashes",
            ));
        }
        return Ok(id.to_owned());
    }
    if has_segments {
        return Err(WalError::corrupt(
            &path,
            0,
            "segments exist but the log id file is missing",
        ));
    }
    let mut bytes = [0u8; ID_BYTES];
    fs::random_bytes(&mut bytes)?;
    let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    fs::write_file_durably(dir, ID_FILE, format!("{id}\n").as_bytes())?;
    tracing::info!(dir = %dir.display(), %id, "created a new write-ahead log");
    Ok(id)
}
