//! Forgetting a pod that will not come back (`sluice pod forget POD`): its ownership of
//! persistent streams is cleared, so resumes elsewhere stop being fenced. The operator
//! accepts that the records only that pod's WAL held (acked, not yet in Delta) are lost;
//! the streams resume from the watermark in the Delta log.

use super::record::PersistentStreamStore;
use crate::error::Result;

/// How often one record's clear is retried when it changes under it.
const ROUNDS: usize = 8;

/// Clears `pod`'s ownership of every persistent stream in `store`; returns how many.
pub async fn forget_pod(store: &dyn PersistentStreamStore, pod: &str) -> Result<usize> {
    let mut cleared = 0;
    for stored in store.list().await? {
        let id = stored.record.id.clone();
        let mut current = stored;
        for _ in 0..ROUNDS {
            if current.record.owner != pod {
                break;
            }
            let mut record = current.record.clone();
            record.owner.clear();
            if store.replace(current.revision, record).await? {
                cleared += 1;
                break;
            }
            match store.get(&id).await? {
                Some(now) => current = now,
                None => break,
            }
        }
    }
    Ok(cleared)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pstreams::record::{PersistentStreamRecord, StreamRecordType};
    use crate::pstreams::FileStreamStore;

    fn record(id: &str, owner: &str) -> PersistentStreamRecord {
        PersistentStreamRecord {
            id: id.into(),
            table: "main.a.b".into(),
            record_type: StreamRecordType::Json,
            descriptor: Vec::new(),
            owner: owner.into(),
            retired: false,
            created_at: "2026-12-05T00:00:00Z".into(),
        }
    }

    #[tokio::test]
    async fn only_the_forgotten_pods_streams_lose_their_owner() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = FileStreamStore::open(dir.path()).expect("open");
        for (id, owner) in [("a", "pod-1"), ("b", "pod-2"), ("c", "pod-1")] {
            assert!(store.replace(0, record(id, owner)).await.expect("create"));
        }
        assert_eq!(forget_pod(&store, "pod-1").await.expect("forget"), 2);
        let owners: Vec<String> = store
            .list()
            .await
            .expect("list")
            .into_iter()
            .map(|s| s.record.owner)
            .collect();
        assert_eq!(owners, vec!["", "pod-2", ""]);
        assert_eq!(forget_pod(&store, "pod-1").await.expect("again"), 0);
    }
}
