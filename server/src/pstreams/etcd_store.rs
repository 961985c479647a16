//! The cluster's persistent stream registry: one etcd key per stream,
//! `/sluice/pstreams/<stream id>`, holding the record as JSON (the descriptor as base64).
//! A write is a compare-and-swap on the key's mod revision (absent: version 0), so two
//! pods moving one stream at once cannot both win; every pod reads the same records.

use sluice_router::Meta;

use super::record::{PersistentStreamRecord, PersistentStreamStore, StoredStream};
use crate::error::{Result, ServerError};

/// Key prefix of persistent stream records.
pub const PSTREAMS_PREFIX: &str = "/sluice/pstreams/";

/// The registry in the meta store.
pub struct EtcdStreamStore {
    meta: Meta,
}

impl EtcdStreamStore {
    /// The registry kept in `meta`.
    pub fn new(meta: Meta) -> EtcdStreamStore {
        EtcdStreamStore { meta }
    }
}

fn meta_error(e: sluice_router::RouterError) -> ServerError {
    ServerError::Unavailable(format!("persistent stream registry (meta store): {e}"))
}

fn decode(key: &[u8], value: &[u8], revision: i64) -> Result<StoredStream> {
    let record = serde_json::from_slice(value).map_err(|e| {
        ServerError::Internal(format!(
            "{} is not a persistent stream record: {e}",
            String::from_utf8_lossy(key)
        ))
    })?;
    Ok(StoredStream { record, revision })
}

#[tonic::async_trait]
impl PersistentStreamStore for EtcdStreamStore {
    async fn get(&self, id: &str) -> Result<Option<StoredStream>> {
        let key = format!("{PSTREAMS_PREFIX}{id}");
        let Some(found) = self.meta.get(&key).await.map_err(meta_error)? else {
            return Ok(None);
        };
        decode(key.as_bytes(), &found.value, found.revision).map(Some)
    }

    async fn replace(&self, expected: i64, record: PersistentStreamRecord) -> Result<bool> {
        let key = format!("{PSTREAMS_PREFIX}{}", record.id);
        let value = serde_json::to_vec(&record)
            .map_err(|e| ServerError::Internal(format!("encoding {key}: {e}")))?;
        let written = self
            .meta
            .compare_and_put(&key, expected, value)
            .await
            .map_err(meta_error)?;
        Ok(written.is_some())
    }

    async fn list(&self) -> Result<Vec<StoredStream>> {
        let found = self
            .meta
            .client()
            .get_prefix(PSTREAMS_PREFIX)
            .await
            .map_err(meta_error)?;
        found
            .kvs
            .iter()
            .map(|kv| decode(&kv.key, &kv.value, kv.mod_revision))
            .collect()
    }
}
