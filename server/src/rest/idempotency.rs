//! The pod's index of REST `Idempotency-Key`s seen within the window
//! (`--idempotency-window`, default 24 h): per `(table, key)`, whether a request with it
//! is being written now or is durable (and when it arrived).
//!
//! Durability: a key is written into the same WAL frame as its request's records
//! (kind 3), so it is durable exactly when they are, and replay after a crash or a
//! SIGKILL rebuilds the index from the frames. Before the WAL purges a segment that holds
//! a key still inside its window, the key is logged again (kind 4, see [`relog_below`]),
//! so keys outlive the records' commit to Delta and the purge.
//!
//! [`relog_below`]: IdempotencyIndex::relog_below

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use sluice_wal::{Lsn, Wal};
use tokio::sync::Notify;

use crate::error::{Result, ServerError};
use crate::journal::frames::{encode_keys, KeyRecord, KIND_KEYS};

/// Most keys kept; past it the oldest go first (a retry of theirs is written again).
pub const MAX_KEYS: usize = 1_000_000;
/// Longest key accepted, bytes.
pub const MAX_KEY_BYTES: usize = 256;

enum State {
    /// A request with this key is being written; others wait on it.
    Pending(Arc<Notify>),
    /// Durable in the WAL frame ending at `lsn` (or a later kind-4 frame).
    Done { at_ms: i64, lsn: Lsn },
}

#[derive(Default)]
struct Inner {
    keys: HashMap<(String, String), State>,
    /// Done keys in arrival order, for expiry and the size bound.
    order: VecDeque<(i64, String, String)>,
}

/// What a request with a key should do.
pub enum Claim {
    /// A request with this key is durable already: answer success, write nothing.
    Seen,
    /// Write it; report the outcome through the guard.
    Mine(KeyGuard),
    /// Another request with this key is in flight: wait, then claim again.
    Wait(Arc<Notify>),
}

/// The keys a pod has seen.
pub struct IdempotencyIndex {
    window_ms: i64,
    inner: Arc<Mutex<Inner>>,
}

/// The claim of a request being written; dropped without [`KeyGuard::done`] (the
/// request failed), the key is free again and waiters retry.
pub struct KeyGuard {
    inner: Arc<Mutex<Inner>>,
    id: Option<(String, String)>,
    at_ms: i64,
}

fn lock(inner: &Mutex<Inner>) -> Result<MutexGuard<'_, Inner>> {
    inner
        .lock()
        .map_err(|_| ServerError::Internal("idempotency index poisoned".into()))
}

impl IdempotencyIndex {
    /// An empty index whose keys count for `window`.
    pub fn new(window: Duration) -> IdempotencyIndex {
        IdempotencyIndex {
            window_ms: i64::try_from(window.as_millis()).unwrap_or(i64::MAX),
            inner: Arc::default(),
        }
    }

    fn expired(&self, at_ms: i64, now_ms: i64) -> bool {
        at_ms.saturating_add(self.window_ms) < now_ms
    }

    /// Claims `(table, key)` for a request that arrived at `now_ms`.
    pub fn claim(&self, table: &str, key: &str, now_ms: i64) -> Result<Claim> {
        let mut inner = lock(&self.inner)?;
        let id = (table.to_string(), key.to_string());
        match inner.keys.get(&id) {
            Some(State::Pending(notify)) => return Ok(Claim::Wait(notify.clone())),
            Some(State::Done { at_ms, .. }) if !self.expired(*at_ms, now_ms) => {
                return Ok(Claim::Seen)
            }
            _ => {}
        }
        inner
            .keys
            .insert(id.clone(), State::Pending(Arc::new(Notify::new())));
        Ok(Claim::Mine(KeyGuard {
            inner: self.inner.clone(),
            id: Some(id),
            at_ms: now_ms,
        }))
    }

    /// Enters a key read back from the WAL (replay), unless it is past its window.
    pub fn restore(&self, key: KeyRecord, lsn: Lsn, now_ms: i64) -> Result<()> {
        if self.expired(key.at_ms, now_ms) {
            return Ok(());
        }
        let mut inner = lock(&self.inner)?;
        let id = (key.table, key.key);
        let newer = match inner.keys.get(&id) {
            Some(State::Done { at_ms, .. }) => *at_ms < key.at_ms,
            _ => true,
        };
        if newer {
            inner
                .order
                .push_back((key.at_ms, id.0.clone(), id.1.clone()));
            inner.keys.insert(
                id,
                State::Done {
                    at_ms: key.at_ms,
                    lsn,
                },
            );
        }
        Ok(())
    }

    /// Number of keys held (in flight or durable).
    pub fn len(&self) -> usize {
        lock(&self.inner).map(|i| i.keys.len()).unwrap_or(0)
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets keys past their window (and the oldest past [`MAX_KEYS`]).
    pub fn expire(&self, now_ms: i64) -> Result<()> {
        let mut inner = lock(&self.inner)?;
        while let Some((at_ms, table, key)) = inner.order.front().cloned() {
            if !self.expired(at_ms, now_ms) && inner.order.len() <= MAX_KEYS {
                break;
            }
            inner.order.pop_front();
            let id = (table, key);
            if matches!(inner.keys.get(&id), Some(State::Done { at_ms: a, .. }) if *a == at_ms) {
                inner.keys.remove(&id);
            }
        }
        Ok(())
    }

    /// Logs again (one kind-4 frame) every key inside its window whose newest frame ends
    /// at or below `point`, so the purge of the segments below `point` keeps it.
    pub async fn relog_below(&self, wal: &Wal, point: Lsn, now_ms: i64) -> Result<Option<Lsn>> {
        self.expire(now_ms)?;
        let keys: Vec<KeyRecord> = {
            let inner = lock(&self.inner)?;
            inner
                .keys
                .iter()
                .filter_map(|((table, key), state)| match state {
                    State::Done { at_ms, lsn } if *lsn <= point => Some(KeyRecord {
                        table: table.clone(),
                        key: key.clone(),
                        at_ms: *at_ms,
                    }),
                    _ => None,
                })
                .collect()
        };
        if keys.is_empty() {
            return Ok(None);
        }
        let payload = encode_keys(&keys);
        let reservation = wal.reserve(payload.len()).await?;
        let lsn = wal.append(reservation, KIND_KEYS, payload)?;
        let mut inner = lock(&self.inner)?;
        for k in keys {
            if let Some(State::Done { lsn: at, .. }) = inner.keys.get_mut(&(k.table, k.key)) {
                *at = (*at).max(lsn);
            }
        }
        Ok(Some(lsn))
    }
}

impl KeyGuard {
    /// The request's records (and this key) are durable in the frame ending at `lsn`.
    pub fn done(mut self, lsn: Lsn) {
        if let Some(id) = self.id.take() {
            if let Ok(mut inner) = lock(&self.inner) {
                inner
                    .order
                    .push_back((self.at_ms, id.0.clone(), id.1.clone()));
                if let Some(State::Pending(notify)) = inner.keys.insert(
                    id,
                    State::Done {
                        at_ms: self.at_ms,
                        lsn,
                    },
                ) {
                    notify.notify_waiters();
                }
            }
        }
    }

    /// When the request arrived (ms since the epoch): goes into its WAL frame.
    pub fn at_ms(&self) -> i64 {
        self.at_ms
    }
}

impl Drop for KeyGuard {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            if let Ok(mut inner) = lock(&self.inner) {
                if let Some(State::Pending(notify)) = inner.keys.remove(&id) {
                    notify.notify_waiters();
                }
            }
        }
    }
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(key: &str, at_ms: i64) -> KeyRecord {
        KeyRecord {
            table: "a.b.c".into(),
            key: key.into(),
            at_ms,
        }
    }

    #[test]
    fn a_durable_key_is_seen_until_its_window_ends() {
        let index = IdempotencyIndex::new(Duration::from_secs(10));
        let Ok(Claim::Mine(guard)) = index.claim("a.b.c", "k", 1_000) else {
            panic!("first claim must be mine");
        };
        assert!(matches!(
            index.claim("a.b.c", "k", 1_001),
            Ok(Claim::Wait(_))
        ));
        assert!(
            matches!(index.claim("a.b.d", "k", 1_001), Ok(Claim::Mine(_))),
            "keys are per table"
        );
        guard.done(7);
        assert!(matches!(index.claim("a.b.c", "k", 10_999), Ok(Claim::Seen)));
        assert!(
            matches!(index.claim("a.b.c", "k", 11_001), Ok(Claim::Mine(_))),
            "expired"
        );
    }

    #[test]
    fn a_failed_request_frees_its_key() {
        let index = IdempotencyIndex::new(Duration::from_secs(10));
        let Ok(Claim::Mine(guard)) = index.claim("a.b.c", "k", 0) else {
            panic!("first claim must be mine");
        };
        drop(guard);
        assert!(matches!(index.claim("a.b.c", "k", 1), Ok(Claim::Mine(_))));
    }

    #[test]
    fn restored_keys_count_and_expire() {
        let index = IdempotencyIndex::new(Duration::from_secs(10));
        index.restore(rec("old", 0), 5, 20_000).expect("restore");
        index
            .restore(rec("new", 15_000), 6, 20_000)
            .expect("restore");
        assert_eq!(index.len(), 1, "the expired key is not restored");
        assert!(matches!(
            index.claim("a.b.c", "new", 20_000),
            Ok(Claim::Seen)
        ));
        index.expire(30_000).expect("expire");
        assert!(index.is_empty());
    }

    /// A key whose records frame is purged (its segment deleted) is still in the WAL
    /// afterwards, in a kind-4 frame logged by `relog_below`; without the re-log it is gone
    /// (the control), so the check can fail.
    #[tokio::test]
    async fn a_key_outlives_the_purge_of_its_records_frame() {
        use crate::journal::frames::{decode_keys, encode_keyed, KIND_KEYED_RECORDS};

        async fn keys_left_after_purge(relog: bool) -> Vec<String> {
            let dir = tempfile::tempdir().expect("tempdir");
            let wal = crate::journal::testwal::small(dir.path());
            let index = IdempotencyIndex::new(Duration::from_secs(3600));
            let now = now_ms();
            let Ok(Claim::Mine(guard)) = index.claim("a.b.c", "k1", now) else {
                panic!("first claim must be mine");
            };
            let payload = encode_keyed("k1", now, &[0u8; 12]);
            let r = wal.reserve(payload.len()).await.expect("reserve");
            let lsn = wal.append(r, KIND_KEYED_RECORDS, payload).expect("append");
            guard.done(lsn);
            let last = crate::journal::testwal::fill_past_first_segment(&wal).await;
            if relog {
                let relogged = index.relog_below(&wal, last, now).await.expect("relog");
                wal.wait_durable(relogged.expect("a key relogged"))
                    .await
                    .expect("durable");
            }
            assert!(wal.purge_below(last).expect("purge") > 0, "segments purged");
            let mut keys = Vec::new();
            for frame in wal.read_from(0).expect("read") {
                let frame = frame.expect("frame");
                if frame.kind == KIND_KEYS {
                    keys.extend(
                        decode_keys(&frame.payload)
                            .expect("keys")
                            .into_iter()
                            .map(|k| k.key),
                    );
                }
                if frame.kind == KIND_KEYED_RECORDS {
                    keys.push("k1".into());
                }
            }
            keys
        }
        assert_eq!(keys_left_after_purge(true).await, vec!["k1".to_string()]);
        assert!(
            keys_left_after_purge(false).await.is_empty(),
            "control: purged without re-log"
        );
    }
}
