//! REST `Idempotency-Key`s across the pods of a cluster: one etcd key per (table, key),
//! `/sluice/idem/<table>/<sha256(key) hex>` = [`KeyClaim`] JSON `{pod, wal, state,
//! at_ms}`, so a retry that the router sends to another pod finds what the first pod did.
//!
//! - Claim: before a pod writes a keyed request it creates the key with a compare
//!   `create_revision == 0`, state `pending`, and in the same transaction a *marker*
//!   `/sluice/idem-pending/<pod>/<table>/<hash>` (empty); the failure branch reads the
//!   key, so one round trip answers either way. A record older than the window counts as
//!   absent: it is replaced under a compare on its mod revision.
//! - Settle: once the request's WAL frame is durable the pod sets `durable` and deletes the
//!   marker (one transaction, a compare on the claim's mod revision); a request refused
//!   before its frame was appended deletes both. Either is retried in the background until
//!   etcd takes it.
//! - A pod that restarts (same pod id, same volume) lists its markers before it serves and
//!   settles each pending claim from its replayed WAL: the key is in a keyed-records or keys
//!   frame → `durable`; it is not (the pod died before the frame was durable) → deleted, so
//!   the client's retry writes it. Markers keep that listing to the claims in flight at
//!   the crash instead of every key of the window.
//! - Leases: no lease per key (each is a raft write and an entry in etcd's lease heap).
//!   Keys arriving in one *bucket* of the window (window / 24, at least 1 s: 1 h for the
//!   default 24 h) share one lease of TTL window + 2 buckets, granted by the pod on the
//!   bucket's first key and never kept alive; a key therefore lives at least the window
//!   and at most window + 2 buckets, and a pod holds at most ~26 such leases.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sluice_proto::etcd::etcdserverpb::response_op::Response;
use sluice_proto::etcd::etcdserverpb::TxnResponse;
use sluice_proto::etcd::mvccpb::KeyValue;
use sluice_router::etcd::kv::{
    create_revision_is, delete_op, get_op, mod_revision_is, put_leased_op,
};
use sluice_router::Meta;

use super::election::meta_error;
use crate::error::{Result, ServerError};

/// Key prefix of the claims.
pub const IDEM_PREFIX: &str = "/sluice/idem/";
/// Key prefix of the pending markers (`<pod>/<table>/<hash>` below it).
pub const IDEM_PENDING_PREFIX: &str = "/sluice/idem-pending/";
/// Buckets per window (each gets one lease).
const BUCKETS_PER_WINDOW: i64 = 24;
/// First pause of a background settle; doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// Where a claimed request stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyState {
    /// Its pod is writing it (or died while writing; see the module doc).
    Pending,
    /// Its records are durable in the WAL of `pod`.
    Durable,
}

/// The value of a claim key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyClaim {
    /// The pod that wrote (or writes) the request.
    pub pod: String,
    /// That pod's WAL id when it claimed.
    pub wal: String,
    /// Pending or durable.
    pub state: KeyState,
    /// When the request arrived (ms since the epoch): the window counts from here.
    pub at_ms: i64,
}

/// What a claim found.
#[derive(Debug)]
pub enum ClaimOutcome {
    /// This pod holds the key now: write the request, then settle the ticket.
    Won(Ticket),
    /// A request with the key is durable (written by `pod`): answer success, write nothing.
    Durable {
        /// Who wrote it.
        pod: String,
    },
    /// A request with the key is being written by `pod` (or `pod` died before settling it).
    Pending {
        /// Who claimed it.
        pod: String,
    },
}

/// A won claim, to be settled: [`ClusterKeys::settle`].
#[derive(Debug, Clone)]
pub struct Ticket {
    claim_key: String,
    marker: String,
    /// Mod revision of the claim as this pod wrote it.
    revision: i64,
    lease: i64,
    claim: KeyClaim,
}

/// How a ticket ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settle {
    /// The request's frame is durable: mark the claim `durable`.
    Durable,
    /// The request was refused before its frame was appended: delete the claim.
    Release,
}

/// This pod's side of the cluster's idempotency keys.
pub struct ClusterKeys {
    meta: Meta,
    pod: String,
    wal: String,
    window_ms: i64,
    bucket_ms: i64,
    /// Bucket number → its lease.
    leases: Mutex<BTreeMap<i64, i64>>,
}

/// Lower-case hex SHA-256 of `key`: the last part of its claim's etcd key.
pub fn key_hash(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn claim_key(table: &str, hash: &str) -> String {
    format!("{IDEM_PREFIX}{}/{hash}", table.to_ascii_lowercase())
}

fn marker_prefix(pod: &str) -> String {
    format!("{IDEM_PENDING_PREFIX}{pod}/")
}

fn marker_key(pod: &str, table: &str, hash: &str) -> String {
    format!(
        "{}{}/{hash}",
        marker_prefix(pod),
        table.to_ascii_lowercase()
    )
}

fn encode(claim: &KeyClaim) -> Result<Vec<u8>> {
    serde_json::to_vec(claim).map_err(|e| ServerError::Internal(format!("key claim: {e}")))
}

fn decode(kv: &KeyValue) -> Result<KeyClaim> {
    serde_json::from_slice(&kv.value).map_err(|e| {
        ServerError::Internal(format!(
            "{} is not a key claim: {e}",
            String::from_utf8_lossy(&kv.key)
        ))
    })
}

/// The key-value the failure branch's read returned, if any.
fn read_back(resp: &TxnResponse) -> Option<&KeyValue> {
    resp.responses.iter().find_map(|r| match &r.response {
        Some(Response::ResponseRange(range)) => range.kvs.first(),
        _ => None,
    })
}

impl ClusterKeys {
    /// Pod `pod` (its WAL `wal`) keeping keys for `window` in `meta`.
    pub fn new(meta: Meta, pod: String, wal: String, window: Duration) -> ClusterKeys {
        let window_ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX / 4);
        ClusterKeys {
            meta,
            pod,
            wal,
            window_ms,
            bucket_ms: (window_ms / BUCKETS_PER_WINDOW).max(1000),
            leases: Mutex::new(BTreeMap::new()),
        }
    }

    fn expired(&self, claim: &KeyClaim, now_ms: i64) -> bool {
        claim.at_ms.saturating_add(self.window_ms) < now_ms
    }

    fn leases(&self) -> std::sync::MutexGuard<'_, BTreeMap<i64, i64>> {
        self.leases.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The lease of the bucket of `now_ms`, granted on its first use.
    async fn lease(&self, now_ms: i64) -> Result<i64> {
        let bucket = now_ms.div_euclid(self.bucket_ms);
        if let Some(id) = self.leases().get(&bucket) {
            return Ok(*id);
        }
        let ttl_ms = self.window_ms.saturating_add(2 * self.bucket_ms);
        let id = self
            .meta
            .client()
            .lease_grant((ttl_ms + 999) / 1000)
            .await
            .map_err(meta_error)?;
        let mut leases = self.leases();
        // Buckets whose keys are all past the window hold expired leases.
        let oldest = bucket - BUCKETS_PER_WINDOW - 3;
        leases.retain(|b, _| *b >= oldest);
        Ok(*leases.entry(bucket).or_insert(id))
    }

    fn forget_lease(&self, lease: i64) {
        self.leases().retain(|_, id| *id != lease);
    }

    /// Claims `key` of `table` for a request that arrived at `now_ms`.
    pub async fn claim(&self, table: &str, key: &str, now_ms: i64) -> Result<ClaimOutcome> {
        let hash = key_hash(key);
        let claim = KeyClaim {
            pod: self.pod.clone(),
            wal: self.wal.clone(),
            state: KeyState::Pending,
            at_ms: now_ms,
        };
        let value = encode(&claim)?;
        let claim_key = claim_key(table, &hash);
        let marker = marker_key(&self.pod, table, &hash);
        // 0: absent; else the mod revision of an expired record to replace.
        let mut expected = 0;
        for attempt in 0..4 {
            let lease = self.lease(now_ms).await?;
            let guard = if expected == 0 {
                create_revision_is(claim_key.as_str(), 0)
            } else {
                mod_revision_is(claim_key.as_str(), expected)
            };
            let put = vec![
                put_leased_op(claim_key.as_str(), value.clone(), lease),
                put_leased_op(marker.as_str(), Vec::new(), lease),
            ];
            let resp = match self
                .meta
                .client()
                .txn_else(vec![guard], put, vec![get_op(claim_key.as_str())])
                .await
            {
                Ok(resp) => resp,
                Err(e) if attempt == 0 => {
                    // A lease etcd no longer knows fails the put: take a new one.
                    tracing::debug!("claiming an idempotency key failed: {e}; retrying");
                    self.forget_lease(lease);
                    continue;
                }
                Err(e) => return Err(meta_error(e)),
            };
            if resp.succeeded {
                let revision = resp.header.map(|h| h.revision).unwrap_or(0);
                return Ok(ClaimOutcome::Won(Ticket {
                    claim_key,
                    marker,
                    revision,
                    lease,
                    claim,
                }));
            }
            let Some(kv) = read_back(&resp) else {
                // Deleted between the compare and the read: claim again.
                expected = 0;
                continue;
            };
            let found = decode(kv)?;
            if self.expired(&found, now_ms) {
                expected = kv.mod_revision;
                continue;
            }
            if found == claim {
                // Our own put of an attempt whose answer was lost: this pod has one
                // request per key in flight, and it arrived at this millisecond.
                return Ok(ClaimOutcome::Won(Ticket {
                    claim_key,
                    marker,
                    revision: kv.mod_revision,
                    lease: kv.lease,
                    claim,
                }));
            }
            return Ok(match found.state {
                KeyState::Durable => ClaimOutcome::Durable { pod: found.pod },
                KeyState::Pending => ClaimOutcome::Pending { pod: found.pod },
            });
        }
        Err(ServerError::Unavailable(format!(
            "the idempotency key's record {claim_key} kept changing; retry"
        )))
    }

    /// Settles `ticket` once: marks it durable or deletes it, and deletes its marker. A
    /// claim replaced meanwhile (only possible past the window) is left alone.
    pub async fn settle_once(&self, ticket: &Ticket, how: Settle) -> Result<()> {
        let success = match how {
            Settle::Durable => {
                let claim = KeyClaim {
                    state: KeyState::Durable,
                    ..ticket.claim.clone()
                };
                put_leased_op(ticket.claim_key.as_str(), encode(&claim)?, ticket.lease)
            }
            Settle::Release => delete_op(ticket.claim_key.as_str()),
        };
        self.meta
            .client()
            .txn_else(
                vec![mod_revision_is(ticket.claim_key.as_str(), ticket.revision)],
                vec![success, delete_op(ticket.marker.as_str())],
                vec![delete_op(ticket.marker.as_str())],
            )
            .await
            .map_err(meta_error)?;
        Ok(())
    }

    /// Settles `ticket`, retrying in the background (a task) if etcd does not take it now;
    /// meanwhile retries of the key elsewhere are answered 503.
    pub async fn settle(self: &std::sync::Arc<Self>, ticket: Ticket, how: Settle) {
        let Err(e) = self.settle_once(&ticket, how).await else {
            return;
        };
        tracing::warn!(
            key = %ticket.claim_key,
            "settling an idempotency key ({how:?}) failed: {e}; retrying in the background"
        );
        let keys = self.clone();
        tokio::spawn(async move {
            let mut pause = FIRST_PAUSE;
            let give_up = tokio::time::Instant::now()
                + Duration::from_millis(u64::try_from(keys.window_ms).unwrap_or(u64::MAX));
            while tokio::time::Instant::now() < give_up {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
                if keys.settle_once(&ticket, how).await.is_ok() {
                    return;
                }
            }
        });
    }

    /// Whether pod `pod` is registered (alive) now.
    pub async fn registered(&self, pod: &str) -> Result<bool> {
        let pods = self.meta.pods().await.map_err(meta_error)?;
        Ok(pods.iter().any(|p| p.id == pod))
    }

    /// Settles every claim this pod left pending (its markers), before it serves: a claim
    /// whose key `written` holds (table, key hash: in the replayed WAL) becomes durable,
    /// any other is deleted. Returns (made durable, deleted).
    pub async fn settle_after_restart(
        &self,
        written: &HashSet<(String, String)>,
    ) -> Result<(usize, usize)> {
        settle_pending(&self.meta, &self.pod, written).await
    }
}

/// Settles every claim pod `pod` left pending: durable when `written` holds its
/// (table, hash), else deleted (a retry then writes the request). Used by the pod itself
/// after a restart, and with nothing written by `sluice pod forget` for a pod that is
/// gone for good. Returns (made durable, deleted).
pub async fn settle_pending(
    meta: &Meta,
    pod: &str,
    written: &HashSet<(String, String)>,
) -> Result<(usize, usize)> {
    let prefix = marker_prefix(pod);
    let markers = meta
        .client()
        .get_prefix(prefix.as_str())
        .await
        .map_err(meta_error)?;
    let (mut durable, mut deleted) = (0, 0);
    for marker in &markers.kvs {
        let name = String::from_utf8_lossy(&marker.key);
        let Some((table, hash)) = name
            .strip_prefix(prefix.as_str())
            .and_then(|rest| rest.split_once('/'))
        else {
            continue;
        };
        let claim_key = claim_key(table, hash);
        let found = meta
            .client()
            .get(claim_key.as_str())
            .await
            .map_err(meta_error)?;
        let mut ops = Vec::new();
        let mut compare = Vec::new();
        let mut made_durable = None;
        if let Some(kv) = found.kvs.first() {
            let claim = decode(kv)?;
            if claim.pod == pod && claim.state == KeyState::Pending {
                compare.push(mod_revision_is(claim_key.as_str(), kv.mod_revision));
                let was_written = written.contains(&(table.to_string(), hash.to_string()));
                if was_written {
                    let value = encode(&KeyClaim {
                        state: KeyState::Durable,
                        ..claim
                    })?;
                    ops.push(put_leased_op(claim_key.as_str(), value, kv.lease));
                } else {
                    ops.push(delete_op(claim_key.as_str()));
                }
                made_durable = Some(was_written);
            }
        }
        ops.push(delete_op(marker.key.clone()));
        let resp = meta
            .client()
            .txn_else(compare, ops, vec![delete_op(marker.key.clone())])
            .await
            .map_err(meta_error)?;
        match made_durable {
            Some(true) if resp.succeeded => durable += 1,
            Some(false) if resp.succeeded => deleted += 1,
            _ => {}
        }
    }
    Ok((durable, deleted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_and_markers_are_named_by_table_and_key_hash() {
        let hash = key_hash("retry-1");
        assert_eq!(hash.len(), 64);
        assert_eq!(
            key_hash(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            claim_key("Main.S.T", &hash),
            format!("/sluice/idem/main.s.t/{hash}")
        );
        assert_eq!(
            marker_key("pod-0", "main.s.t", &hash),
            format!("/sluice/idem-pending/pod-0/main.s.t/{hash}")
        );
    }

    #[test]
    fn a_claim_reads_back_as_written() {
        let claim = KeyClaim {
            pod: "pod-0".into(),
            wal: "w".into(),
            state: KeyState::Durable,
            at_ms: 7,
        };
        let kv = KeyValue {
            key: b"k".to_vec(),
            value: encode(&claim).expect("encode"),
            ..Default::default()
        };
        assert_eq!(decode(&kv).expect("decode"), claim);
        assert!(String::from_utf8_lossy(&kv.value).contains("\"durable\""));
    }
}
