//! This pod's committer roles in a cluster and the route of its sinks'
//! hand-offs ([`CommitRoles`], a [`HandOffRoute`]).
//!
//! A hand-off goes to the table's elected committer: this pod's own fenced
//! [`Committer`] when it holds the role, else the holder over gRPC. With no
//! holder, the pod campaigns (lazily, on the table's first hand-off, after
//! its rank delay; `election`); on winning it starts a fenced committer,
//! which claims the table first. On Deposed / Stopped / not-the-committer /
//! a connection failure the route resolves the committer again and resends
//! the SAME hand-off (the committer's covered-check makes that safe); on
//! Busy it backs off and resends. A call to a remote committer is abandoned
//! as soon as its role key goes (a paused holder never answers). Meanwhile
//! the sink's flush waits, its memtable fills and `wait_for_room` slows the
//! producers.
//!
//! A role ends when the role lease is lost (etcd said it is gone), when its
//! key is deleted or replaced (watched), when its committer reports Deposed
//! or Stopped, or at a graceful stop ([`CommitRoles::resign`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use deltalake::DeltaTable;
use futures::future::BoxFuture;
use sluice_router::Meta;
use tokio_util::sync::CancellationToken;

use super::election::{campaign, rank, read_holder, role_ended, Holder, RoleLease, RANK_DELAY};
use super::peer_client::PeerClient;
use crate::auth::Authenticator;
use crate::commit::{
    Committer, CommitterConfig, Fencing, HandOff, HandOffAck, HandOffError, HandOffRoute,
};
use crate::error::{Result, ServerError};

/// How long one hand-off is resent before its error goes back to the sink
/// (whose flush loop sends it again later).
const PATIENCE: Duration = Duration::from_secs(30);
/// First pause before a resend; doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const MAX_PAUSE: Duration = Duration::from_secs(1);

type Answer = std::result::Result<HandOffAck, HandOffError>;

/// A role this pod holds: the epoch and its committer.
struct Role {
    epoch: u64,
    committer: Arc<Committer>,
}

/// Where a table's hand-offs go now.
enum Target {
    Local(Arc<Committer>),
    Remote(Holder),
}

/// This pod's committer roles and its way to other pods' committers.
pub struct CommitRoles {
    meta: Meta,
    pod_id: String,
    addr: String,
    lease: Arc<RoleLease>,
    config: CommitterConfig,
    held: Mutex<HashMap<String, Role>>,
    /// Other pods' roles as last read (dropped on any failure).
    known: Mutex<HashMap<String, Holder>>,
    client: PeerClient,
    stop: CancellationToken,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl CommitRoles {
    /// Starts the role lease's keep-alive and the watch for its loss. `addr`
    /// is this pod's advertised address; `config` is its committers'.
    pub fn start(
        meta: Meta,
        pod_id: String,
        addr: String,
        auth: Arc<Authenticator>,
        config: CommitterConfig,
    ) -> Arc<CommitRoles> {
        let lease = Arc::new(RoleLease::new(meta.clone()));
        let roles = Arc::new(CommitRoles {
            client: PeerClient::new(auth, pod_id.clone()),
            meta,
            pod_id,
            addr,
            lease: lease.clone(),
            config,
            held: Mutex::new(HashMap::new()),
            known: Mutex::new(HashMap::new()),
            stop: CancellationToken::new(),
        });
        let stop = roles.stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = lease.keep_alive() => {}
                _ = stop.cancelled() => {}
            }
        });
        let mut lost = roles.lease.lost();
        let weak = Arc::downgrade(&roles);
        let stop = roles.stop.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = lost.changed() => if changed.is_err() { return },
                    _ = stop.cancelled() => return,
                }
                match weak.upgrade() {
                    Some(roles) => roles.drop_all(),
                    None => return,
                }
            }
        });
        roles
    }

    /// This pod's id.
    pub fn pod_id(&self) -> &str {
        &self.pod_id
    }

    /// The epoch and committer of `table` if this pod holds its role.
    pub fn holding(&self, table: &str) -> Option<(u64, Arc<Committer>)> {
        lock(&self.held)
            .get(&table.to_ascii_lowercase())
            .map(|r| (r.epoch, r.committer.clone()))
    }

    /// The elected committer of `table` as etcd says now (for messages).
    pub async fn holder(&self, table: &str) -> Result<Option<Holder>> {
        read_holder(&self.meta, table).await
    }

    /// Ends the role of `table` held with `epoch` (its committer stops once
    /// its in-flight hand-offs are answered).
    fn drop_role(&self, table: &str, epoch: u64) {
        let mut held = lock(&self.held);
        let key = table.to_ascii_lowercase();
        if held.get(&key).is_some_and(|r| r.epoch == epoch) {
            held.remove(&key);
            tracing::warn!(table, epoch, "no longer the committer of this table");
        }
    }

    fn drop_all(&self) {
        let dropped: Vec<(String, u64)> = lock(&self.held)
            .drain()
            .map(|(t, r)| (t, r.epoch))
            .collect();
        for (table, epoch) in dropped {
            tracing::warn!(table, epoch, "committer role lost with the lease");
        }
    }

    /// Graceful stop: ends every role (revokes the lease, so other pods can
    /// be elected at once) and the background tasks.
    pub async fn resign(&self) {
        self.lease.revoke().await;
        self.drop_all();
        self.stop.cancel();
    }

    /// Hands `handoff` to its committer if this pod holds the role with
    /// `epoch` (0: any epoch); else refuses, naming the holder.
    pub async fn serve(&self, epoch: u64, handoff: HandOff) -> Answer {
        let table = handoff.table.clone();
        match self.holding(&table) {
            Some((held, committer)) if epoch == 0 || epoch == held => {
                let answer = committer.hand_off(handoff).await;
                if let Err(HandOffError::Deposed { .. } | HandOffError::Stopped { .. }) = &answer {
                    self.drop_role(&table, held);
                }
                answer
            }
            _ => {
                let holder = match self.holder(&table).await {
                    Ok(Some(h)) => h.to_string(),
                    Ok(None) => "none yet".to_string(),
                    Err(e) => format!("unknown ({e})"),
                };
                Err(HandOffError::NotCommitter { table, holder })
            }
        }
    }

    /// Becomes the committer of `table` with `epoch`: starts its fenced
    /// committer (claim first) on a clone of `delta` and watches the key.
    fn take_role(self: &Arc<Self>, table: &str, epoch: u64, delta: &DeltaTable) -> Arc<Committer> {
        let key = table.to_ascii_lowercase();
        let mut held = lock(&self.held);
        if let Some(role) = held.get(&key).filter(|r| r.epoch == epoch) {
            return role.committer.clone();
        }
        let committer = Arc::new(Committer::spawn(
            table.to_string(),
            delta.clone(),
            self.config,
            Fencing::Epoch(epoch),
        ));
        held.insert(
            key,
            Role {
                epoch,
                committer: committer.clone(),
            },
        );
        drop(held);
        tracing::info!(table, epoch, "elected the committer of this table");
        let weak = Arc::downgrade(self);
        tokio::spawn(watch_role(
            weak,
            table.to_string(),
            epoch,
            self.stop.clone(),
        ));
        committer
    }

    /// Where `table`'s hand-offs go: campaigns when no pod holds the role.
    async fn resolve(self: &Arc<Self>, table: &str, delta: &DeltaTable) -> Result<Target> {
        if let Some((_, committer)) = self.holding(table) {
            return Ok(Target::Local(committer));
        }
        let key = table.to_ascii_lowercase();
        if let Some(holder) = lock(&self.known).get(&key).cloned() {
            return Ok(Target::Remote(holder));
        }
        let mut holder = read_holder(&self.meta, table).await?;
        if holder.is_none() {
            let pods: Vec<String> = self
                .meta
                .pods()
                .await
                .map_err(super::election::meta_error)?
                .into_iter()
                .map(|p| p.id)
                .collect();
            let rank = rank(&pods, &self.pod_id, table);
            if rank > 0 {
                tokio::time::sleep(RANK_DELAY * rank as u32).await;
                holder = read_holder(&self.meta, table).await?;
            }
            if holder.is_none() {
                let lease = self.lease.id().await?;
                holder = campaign(&self.meta, table, &self.pod_id, &self.addr, lease).await?;
            }
        }
        let holder = holder.ok_or_else(|| {
            ServerError::Unavailable(format!("no committer of {table} elected yet"))
        })?;
        if holder.pod == self.pod_id {
            if self.lease.current() == Some(holder.lease) {
                return Ok(Target::Local(self.take_role(table, holder.epoch, delta)));
            }
            return Err(ServerError::Unavailable(format!(
                "the committer role of {table} is held by an earlier process of this pod; \
                 waiting for its lease to expire"
            )));
        }
        lock(&self.known).insert(key, holder.clone());
        Ok(Target::Remote(holder))
    }

    /// Forgets what was resolved for `table` after a failure there.
    fn forget(&self, table: &str, local_failed: Option<u64>) {
        lock(&self.known).remove(&table.to_ascii_lowercase());
        if let Some(epoch) = local_failed {
            self.drop_role(table, epoch);
        }
    }

    /// Sends `handoff` to the remote committer `holder`; gives up as soon as
    /// its role key is deleted or replaced (a paused or partitioned holder
    /// never answers, and its successor must get the hand-off). While etcd
    /// cannot be watched, the call just runs (up to its timeout).
    async fn call(&self, holder: &Holder, handoff: &HandOff) -> Answer {
        let ended = async {
            if role_ended(&self.meta, &handoff.table, holder.epoch)
                .await
                .is_err()
            {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            answer = self.client.hand_off(holder, handoff) => answer,
            _ = ended => Err(HandOffError::NotCommitter {
                table: handoff.table.clone(),
                holder: format!("{holder} no more"),
            }),
        }
    }

    /// The route loop (see the module doc).
    async fn route(self: Arc<Self>, delta: &DeltaTable, handoff: HandOff) -> Answer {
        let table = handoff.table.clone();
        let deadline = Instant::now() + PATIENCE;
        let mut pause = FIRST_PAUSE;
        loop {
            let mut local_epoch = None;
            let answer = match self.resolve(&table, delta).await {
                Ok(Target::Local(committer)) => {
                    local_epoch = committer.fencing().epoch();
                    committer.hand_off(handoff.clone()).await
                }
                Ok(Target::Remote(holder)) => self.call(&holder, &handoff).await,
                Err(e) => Err(HandOffError::Unreachable {
                    table: table.clone(),
                    message: e.to_string(),
                }),
            };
            let e = match answer {
                Ok(ack) => return Ok(ack),
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                return Err(e);
            }
            match &e {
                HandOffError::Busy { .. } => {
                    tracing::debug!(table, "committer busy; backing off: {e}");
                }
                e if e.re_resolve() => {
                    tracing::info!(table, "resolving the committer again: {e}");
                    self.forget(&table, local_epoch);
                }
                _ => return Err(e),
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }
}

impl HandOffRoute for Arc<CommitRoles> {
    fn hand_off<'a>(&'a self, table: &'a DeltaTable, handoff: HandOff) -> BoxFuture<'a, Answer> {
        Box::pin(self.clone().route(table, handoff))
    }
}

/// Ends the role of `table` at `epoch` once its key is deleted or replaced.
/// When the watch fails (etcd unreachable), checks the key when it can and
/// watches again; the role is kept meanwhile (the log's epoch fences).
async fn watch_role(roles: Weak<CommitRoles>, table: String, epoch: u64, stop: CancellationToken) {
    loop {
        let Some(r) = roles.upgrade() else { return };
        if r.holding(&table).is_none_or(|(e, _)| e != epoch) {
            return;
        }
        let meta = r.meta.clone();
        drop(r);
        let ended = tokio::select! {
            ended = role_ended(&meta, &table, epoch) => ended,
            _ = stop.cancelled() => return,
        };
        let gone = match ended {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(table, "watching the committer role failed: {e}");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = stop.cancelled() => return,
                }
                match read_holder(&meta, &table).await {
                    Ok(holder) => holder.is_none_or(|h| h.epoch != epoch),
                    Err(_) => false,
                }
            }
        };
        if gone {
            if let Some(r) = roles.upgrade() {
                r.drop_role(&table, epoch);
            }
            return;
        }
    }
}
