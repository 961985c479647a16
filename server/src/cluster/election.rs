//! The committer election in etcd: key `/sluice/committers/<table>` =
//! [`Holder`] JSON, created with a compare `create_revision == 0` under the
//! pod's role lease; the epoch is the revision of that create (strictly
//! increasing over all elections of the table). Pods rank themselves per
//! table by rendezvous hash of (pod id, table) and rank k campaigns after
//! k × [`RANK_DELAY`], so committers spread over the pods.
//!
//! The role lease ([`RoleLease`], TTL [`LEASE_TTL_SECS`]) is this pod's,
//! granted on its first campaign and kept alive every second; when etcd
//! answers that it is gone, every role held under it is lost (the
//! subscribers of [`RoleLease::lost`] drop their committers). While etcd is
//! unreachable the roles are kept: the epoch in the Delta log, not etcd,
//! fences a committer that was replaced meanwhile.

use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sluice_proto::etcd::mvccpb::event::EventType;
use sluice_router::etcd::kv::{create_revision_is, put_leased_op};
use sluice_router::registration::LEASE_TTL_SECS;
use sluice_router::Meta;
use tokio::sync::watch;

use crate::error::{Result, ServerError};

/// Key prefix of the committer roles.
pub const COMMITTERS_PREFIX: &str = "/sluice/committers/";
/// Delay per rank before a pod campaigns for a table.
pub const RANK_DELAY: Duration = Duration::from_millis(200);
/// How often the role lease is kept alive.
const KEEP_ALIVE_EVERY: Duration = Duration::from_secs(1);

/// Who commits a table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// The committer's pod id.
    pub pod: String,
    /// Its advertised address (pod-to-pod gRPC).
    pub addr: String,
    /// Its fencing epoch: the revision of the key's create.
    pub epoch: u64,
    /// The etcd lease the role is held under (read from etcd, not stored).
    #[serde(skip)]
    pub lease: i64,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pod {} at {} (epoch {})",
            self.pod, self.addr, self.epoch
        )
    }
}

pub(crate) fn meta_error(e: sluice_router::RouterError) -> ServerError {
    ServerError::Unavailable(format!("meta store: {e}"))
}

/// The role key of `table` (lower-cased).
pub fn committer_key(table: &str) -> String {
    format!("{COMMITTERS_PREFIX}{}", table.to_ascii_lowercase())
}

/// The current committer of `table`, if one is elected. The epoch is the
/// key's create revision, whatever the value says.
pub async fn read_holder(meta: &Meta, table: &str) -> Result<Option<Holder>> {
    let key = committer_key(table);
    let resp = meta.client().get(key.as_str()).await.map_err(meta_error)?;
    let Some(kv) = resp.kvs.into_iter().next() else {
        return Ok(None);
    };
    let mut holder: Holder = serde_json::from_slice(&kv.value)
        .map_err(|e| ServerError::Internal(format!("committer record {key}: {e}")))?;
    holder.epoch = u64::try_from(kv.create_revision).unwrap_or(0);
    holder.lease = kv.lease;
    Ok(Some(holder))
}

/// Tries to become the committer of `table` under `lease`. Returns the
/// holder afterwards: this pod with its epoch if it won, else the winner.
pub async fn campaign(
    meta: &Meta,
    table: &str,
    pod: &str,
    addr: &str,
    lease: i64,
) -> Result<Option<Holder>> {
    let key = committer_key(table);
    let mut holder = Holder {
        pod: pod.to_string(),
        addr: addr.to_string(),
        epoch: 0,
        lease,
    };
    let value = serde_json::to_vec(&holder)
        .map_err(|e| ServerError::Internal(format!("committer record: {e}")))?;
    let client = meta.client();
    let resp = client
        .txn(
            vec![create_revision_is(key.as_str(), 0)],
            vec![put_leased_op(key.as_str(), value, lease)],
        )
        .await
        .map_err(meta_error)?;
    if !resp.succeeded {
        return read_holder(meta, table).await;
    }
    let revision = resp.header.map(|h| h.revision).unwrap_or(0);
    holder.epoch = u64::try_from(revision).unwrap_or(0);
    // Record the epoch in the value too (for people reading etcd); readers
    // take it from the create revision, so a failure here changes nothing.
    if let Ok(value) = serde_json::to_vec(&holder) {
        let _ = client
            .txn(
                vec![create_revision_is(key.as_str(), revision)],
                vec![put_leased_op(key.as_str(), value, lease)],
            )
            .await;
    }
    Ok(Some(holder))
}

/// This pod's rank for `table` among `pods` (itself included or not): 0 for
/// the pod with the highest rendezvous hash of (pod id, table).
pub fn rank(pods: &[String], me: &str, table: &str) -> usize {
    let mine = rendezvous(me, table);
    pods.iter()
        .filter(|p| p.as_str() != me)
        .filter(|p| rendezvous(p, table) > mine)
        .count()
}

/// FNV-1a of `pod`, a separator and `table` (stable across processes).
fn rendezvous(pod: &str, table: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in pod
        .bytes()
        .chain(std::iter::once(0))
        .chain(table.to_ascii_lowercase().bytes())
    {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    // Mix the low bits up (FNV's high bits vary little for short keys).
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^ (hash >> 33)
}

/// Resolves when the role key of `table` created at `epoch` is deleted or
/// replaced (Ok), or the watch fails (Err).
pub async fn role_ended(meta: &Meta, table: &str, epoch: u64) -> Result<()> {
    let key = committer_key(table);
    let start = i64::try_from(epoch).unwrap_or(i64::MAX);
    let mut stream = meta.client().watch(&key, start).await.map_err(meta_error)?;
    loop {
        let Some(msg) = stream.message().await.map_err(meta_error)? else {
            return Err(ServerError::Unavailable(format!(
                "etcd closed the watch of {key}"
            )));
        };
        for event in &msg.events {
            let replaced = event
                .kv
                .as_ref()
                .is_some_and(|kv| u64::try_from(kv.create_revision).unwrap_or(0) != epoch);
            if event.r#type() == EventType::Delete || replaced {
                return Ok(());
            }
        }
    }
}

/// The lease this pod's committer roles are held under.
pub struct RoleLease {
    meta: Meta,
    id: Mutex<Option<i64>>,
    /// Bumped every time the lease is found gone.
    lost: watch::Sender<u64>,
}

impl RoleLease {
    /// No lease yet (granted on first use).
    pub fn new(meta: Meta) -> RoleLease {
        RoleLease {
            meta,
            id: Mutex::new(None),
            lost: watch::channel(0).0,
        }
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<i64>> {
        self.id.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The lease id, granted now if there is none.
    pub async fn id(&self) -> Result<i64> {
        if let Some(id) = *self.slot() {
            return Ok(id);
        }
        let id = self
            .meta
            .client()
            .lease_grant(LEASE_TTL_SECS)
            .await
            .map_err(meta_error)?;
        let mut slot = self.slot();
        match *slot {
            // Another campaign granted one meanwhile; ours expires unused.
            Some(existing) => Ok(existing),
            None => {
                *slot = Some(id);
                Ok(id)
            }
        }
    }

    /// The lease id if one is held (none granted).
    pub fn current(&self) -> Option<i64> {
        *self.slot()
    }

    /// A receiver that changes every time the lease is lost.
    pub fn lost(&self) -> watch::Receiver<u64> {
        self.lost.subscribe()
    }

    /// Keeps the lease alive until dropped (run as a task): when etcd says it
    /// is gone, forgets it and tells the subscribers of [`lost`](Self::lost).
    pub async fn keep_alive(&self) {
        let mut ticker = tokio::time::interval(KEEP_ALIVE_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let Some(id) = *self.slot() else { continue };
            match self.meta.client().lease_keep_alive(id).await {
                Ok(ttl) if ttl > 0 => {}
                Ok(_) => self.forget(id),
                Err(e) => tracing::debug!("keeping the committer lease alive failed: {e}"),
            }
        }
    }

    /// Forgets lease `id` (gone) and tells the subscribers.
    fn forget(&self, id: i64) {
        let mut slot = self.slot();
        if *slot == Some(id) {
            *slot = None;
            drop(slot);
            tracing::warn!(
                lease = id,
                "the committer lease expired: every committer role of this pod is lost"
            );
            self.lost.send_modify(|n| *n += 1);
        }
    }

    /// Revokes the lease (graceful stop): every role held under it ends now.
    pub async fn revoke(&self) {
        let id = self.slot().take();
        if let Some(id) = id {
            if let Err(e) = self.meta.client().lease_revoke(id).await {
                tracing::warn!("revoking the committer lease failed (it will expire): {e}");
            }
            self.lost.send_modify(|n| *n += 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::rank;

    #[test]
    fn ranks_are_a_permutation_and_spread_tables_over_pods() {
        let pods: Vec<String> = (0..3).map(|i| format!("pod-{i}")).collect();
        let mut first = [0usize; 3];
        for t in 0..60 {
            let table = format!("main.s.t{t}");
            let mut ranks: Vec<usize> = pods.iter().map(|p| rank(&pods, p, &table)).collect();
            let winner = ranks.iter().position(|r| *r == 0).expect("a rank 0");
            first[winner] += 1;
            ranks.sort_unstable();
            assert_eq!(ranks, vec![0, 1, 2], "table {table}");
        }
        for (pod, n) in first.iter().enumerate() {
            assert!(
                *n >= 8,
                "pod-{pod} ranks first for {n} of 60 tables: {first:?}"
            );
        }
    }

    #[test]
    fn a_pod_missing_from_the_list_still_gets_its_rank() {
        let others = vec!["a".to_string(), "b".to_string()];
        assert!(rank(&others, "c", "main.s.t") <= 2);
    }
}
