//! The schema fence: every hand-off names the Delta schema its files were
//! written with (a digest of the schema's JSON, [`schema_id`]), and the
//! committer commits it only while the table's schema is still that one. A
//! pod that wrote files before `sluice table alter` changed the table (on
//! this pod or another) gets [`HandOffError::StaleSchema`]; it reloads the
//! table, writes the same rows again under the new schema and sends the same
//! WAL range with the new files, so no file of an outdated schema is
//! committed after the change. An empty id (a pod without the fence) is not
//! checked.

use deltalake::DeltaTable;
use sha2::{Digest, Sha256};

use super::handoff::{HandOff, HandOffError};
use crate::error::{Result, ServerError};

/// The id of the Delta schema of `table`'s loaded snapshot: the first 16
/// bytes of the SHA-256 of its JSON, in hex.
pub fn schema_id(table: &DeltaTable) -> Result<String> {
    let schema = table.snapshot()?.schema();
    let json = serde_json::to_vec(schema.as_ref())
        .map_err(|e| ServerError::Internal(format!("encoding the Delta schema: {e}")))?;
    let digest = Sha256::digest(&json);
    Ok(digest[..16].iter().map(|b| format!("{b:02x}")).collect())
}

/// Refuses `handoff` when its files were written under another schema than
/// `current` (the table's, just reloaded).
pub(crate) fn check(table: &str, handoff: &HandOff, current: &str) -> Result<(), HandOffError> {
    if handoff.schema_id.is_empty() || handoff.schema_id == current {
        return Ok(());
    }
    Err(HandOffError::StaleSchema {
        table: table.to_string(),
        written: handoff.schema_id.clone(),
        current: current.to_string(),
    })
}
