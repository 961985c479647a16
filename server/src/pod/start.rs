//! A pod's lifecycle. Start: open the catalog, create the admin principal on
//! first start, open the WAL, open every table's Delta log to learn how far
//! this WAL is committed, replay the rest, commit; then it serves. Stop: let
//! streams ack and end, commit every memtable, close (after a drain: delete)
//! the WAL.

use std::collections::HashSet;
use std::sync::Arc;

use sluice_wal::{Durability, Lsn, Wal, WalOptions};
use tokio::sync::Mutex as AsyncMutex;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use sluice_router::Meta;

use super::{open_sink, Pod, SinkEnv, WalKeepers};
use crate::auth::bootstrap::bootstrap_admin;
use crate::auth::kek::pod_kek;
use crate::auth::Authenticator;
use crate::catalog::{Catalog, EtcdStore};
use crate::cluster::idem_claims::{key_hash, ClusterKeys};
use crate::cluster::load::LoadCounters;
use crate::cluster::pstreams_peers::PeerStreams;
use crate::cluster::roles::CommitRoles;
use crate::config::{AuthMode, ClusterConfig, ServeConfig};
use crate::error::{Result, ServerError};
use crate::journal::frames::KeyRecord;
use crate::journal::{replay, Qos2Ledger, StreamRegistry};
use crate::pstreams::{
    EtcdStreamStore, FileStreamStore, PersistentStreamStore, PersistentStreams, StreamPeers,
};
use crate::rest::idempotency::{now_ms, IdempotencyIndex};
use crate::sink::Sinks;
use crate::warehouse::Warehouse;

impl Pod {
    /// Starts a pod: recovery included, ready to serve when this returns.
    pub async fn start(config: ServeConfig) -> Result<Arc<Pod>> {
        config.sanitize()?;
        crate::data_dir::tighten(&config.data_dir)?;
        let catalog = Arc::new(open_catalog(&config).await?);
        if config.auth == AuthMode::OAuth {
            bootstrap_admin(&catalog, &config)?;
        } else {
            tracing::warn!(
                "AUTHENTICATION IS OFF (--auth none): anyone who can reach {} can write to every table",
                config.listen
            );
        }
        let has_sealed_keys = catalog.signing_keys()?.iter().any(|k| k.sealed.is_some());
        let kek = pod_kek(
            config.secrets_key.as_ref(),
            &config.data_dir,
            config.cluster.is_some(),
            has_sealed_keys,
        )?;
        let auth = Arc::new(Authenticator::new(
            config.auth,
            catalog.clone(),
            config.token_ttl,
            kek,
        )?);
        let wal = open_wal(&config)?;
        let warehouse = Warehouse::parse(
            config.warehouse.as_deref(),
            &config.data_dir.join("warehouse"),
            &config.s3,
        )?;
        let streams = Arc::new(StreamRegistry::default());
        let keys = Arc::new(IdempotencyIndex::new(config.idempotency_window));
        let qos2 = Arc::new(Qos2Ledger::default());
        let keepers = Arc::new(WalKeepers {
            streams: streams.clone(),
            keys: keys.clone(),
            qos2: qos2.clone(),
        });
        let sinks = Sinks::new(
            wal.clone(),
            config.flush_interval,
            config.upkeep.clone(),
            keepers,
        );
        let meta = match &config.cluster {
            Some(cluster) => Some(
                Meta::connect(&cluster.join, &cluster.etcd.options()?)
                    .await
                    .map_err(|e| ServerError::Unavailable(format!("meta store: {e}")))?,
            ),
            None => None,
        };
        let roles = match (&config.cluster, &meta) {
            (Some(cluster), Some(meta)) => {
                Some(start_roles(meta.clone(), cluster, &config, auth.clone()))
            }
            _ => None,
        };
        // Opened first: it holds the pod's id (`Pod::pod_id`), which settling alters needs.
        let pstreams = open_pstreams(&config, &auth, meta.clone())?;
        for entry in catalog.tables()? {
            let entry =
                crate::evolve::settle(&catalog, &warehouse, entry, pstreams.pod_id()).await?;
            let env = SinkEnv {
                warehouse: &warehouse,
                wal: &wal,
                config: &config,
                roles: roles.as_ref(),
            };
            sinks.insert(Arc::new(open_sink(env, &entry).await?))?;
        }
        let idem_claims = match (&config.cluster, &meta) {
            (Some(cluster), Some(meta)) => Some(Arc::new(ClusterKeys::new(
                meta.clone(),
                cluster.pod_id.clone(),
                wal.id().to_string(),
                config.idempotency_window,
            ))),
            _ => None,
        };
        let replayed = replay(&wal, &sinks, &streams)?;
        for (id, (offset, lsn)) in &replayed.persistent {
            pstreams.wal_logged(id, *offset, *lsn);
        }
        if let Some(claims) = &idem_claims {
            settle_claims(claims, &replayed.keys).await?;
        }
        let now = now_ms();
        for (key, lsn) in replayed.keys {
            keys.restore(key, lsn, now)?;
        }
        if !keys.is_empty() {
            tracing::info!(keys = keys.len(), "idempotency keys restored from the WAL");
        }
        qos2.restore(replayed.mqtt_received);
        if !qos2.is_empty() {
            tracing::info!(
                pairs = qos2.len(),
                "MQTT QoS 2 publishes restored from the WAL"
            );
        }
        if replayed.rows > 0 {
            tracing::info!(
                rows = replayed.rows,
                frames = replayed.frames,
                "replayed WAL records not yet in Delta"
            );
        }
        sinks.flush_all().await?;
        let shutdown = CancellationToken::new();
        let warehouse_watch = Arc::new(crate::health::WarehouseWatch::default());
        warehouse_watch.spawn(
            &warehouse,
            crate::health::warehouse_watch::probe_interval(config.warehouse_unhealthy_after),
            shutdown.clone(),
        )?;
        let wal_stopped = CancellationToken::new();
        tokio::spawn(watch_wal_stops(wal.subscribe(), wal_stopped.clone()));
        let pod = Arc::new(Pod {
            config,
            catalog,
            auth,
            wal,
            sinks,
            streams,
            pstreams,
            warehouse,
            shutdown,
            stream_tasks: TaskTracker::new(),
            ddl: AsyncMutex::new(()),
            draining: CancellationToken::new(),
            wal_stopped,
            load: Arc::new(LoadCounters::default()),
            roles,
            idempotency: keys,
            qos2,
            idem_claims,
            warehouse_watch,
        });
        if pod.config.cluster.is_some() {
            pod.spawn_schema_watch();
        }
        Ok(pod)
    }

    /// Graceful stop: streams ack what is durable and end, every memtable is
    /// committed, the WAL is closed. After a drain (`drained`), the WAL, whose
    /// every frame is then in Delta, is deleted.
    pub async fn stop(&self, drained: bool) -> Result<()> {
        self.shutdown.cancel();
        self.stream_tasks.close();
        self.stream_tasks.wait().await;
        let flushed = self.sinks.flush_all().await;
        self.sinks.stop().await;
        if let Some(roles) = &self.roles {
            // After the last hand-offs: other pods are elected at once.
            roles.resign().await;
        }
        let rows = flushed?;
        let mut all_committed = self.wal.queued_bytes() == 0;
        for sink in self.sinks.all() {
            all_committed &= !sink.has_pending()?;
        }
        if drained && all_committed {
            let segments = self.wal.close_and_delete()?;
            tracing::info!(
                rows,
                segments,
                "pod drained; memtables committed; WAL empty (deleted)"
            );
        } else {
            self.wal.close()?;
            tracing::info!(rows, "pod stopped; memtables committed");
        }
        Ok(())
    }
}

/// Settles the idempotency-key claims this pod left pending in etcd when it stopped
/// (SIGKILL, crash): durable if `written` (the keys of its replayed WAL) holds the key,
/// else deleted. Before the pod serves, so a retry elsewhere is fenced until then.
async fn settle_claims(claims: &ClusterKeys, written: &[(KeyRecord, Lsn)]) -> Result<()> {
    let written: HashSet<(String, String)> = written
        .iter()
        .map(|(k, _)| (k.table.to_ascii_lowercase(), key_hash(&k.key)))
        .collect();
    let (durable, deleted) = claims.settle_after_restart(&written).await?;
    if durable + deleted > 0 {
        tracing::info!(
            durable,
            deleted,
            "idempotency keys this pod left pending in etcd settled from its WAL"
        );
    }
    Ok(())
}

/// The committer roles of a cluster pod (election in etcd, hand-off routing).
fn start_roles(
    meta: Meta,
    cluster: &ClusterConfig,
    config: &ServeConfig,
    auth: Arc<Authenticator>,
) -> Arc<CommitRoles> {
    let committer = config.committer();
    CommitRoles::start(
        meta,
        cluster.pod_id.clone(),
        cluster.advertise.clone(),
        auth,
        committer,
    )
}

/// The catalog: in etcd when the pod joins a cluster, else in the data dir.
async fn open_catalog(config: &ServeConfig) -> Result<Catalog> {
    match &config.cluster {
        Some(cluster) => {
            let join = cluster.join.clone();
            let options = cluster.etcd.options()?;
            let store = tokio::task::spawn_blocking(move || EtcdStore::connect(&join, options))
                .await
                .map_err(|e| ServerError::Internal(format!("catalog connect task: {e}")))??;
            Catalog::with_store(Box::new(store))
        }
        None => Catalog::open(&config.data_dir),
    }
}

/// The persistent stream registry: in etcd (`meta`) with the other pods as peers when the
/// pod joins a cluster (owned by its `--pod-id`), else in the data directory (owner
/// `single-node`).
fn open_pstreams(
    config: &ServeConfig,
    auth: &Arc<Authenticator>,
    meta: Option<Meta>,
) -> Result<Arc<PersistentStreams>> {
    let (Some(cluster), Some(meta)) = (&config.cluster, meta) else {
        let store = FileStreamStore::open(&config.data_dir)?;
        return Ok(Arc::new(PersistentStreams::new(
            Box::new(store),
            super::SINGLE_NODE_POD_ID,
            None,
        )));
    };
    let store: Box<dyn PersistentStreamStore> = Box::new(EtcdStreamStore::new(meta.clone()));
    let peers: Box<dyn StreamPeers> =
        Box::new(PeerStreams::new(meta, auth.clone(), cluster.pod_id.clone()));
    Ok(Arc::new(PersistentStreams::new(
        store,
        cluster.pod_id.clone(),
        Some(peers),
    )))
}

/// The WAL in `<data-dir>/wal`, recovered up to its last whole frame.
fn open_wal(config: &ServeConfig) -> Result<Wal> {
    let mut wal_options = WalOptions::new(config.data_dir.join(crate::data_dir::WAL_DIR));
    wal_options.segment_bytes = config.wal_segment_bytes;
    wal_options.prepare_segments = config.wal_prepare_segments;
    wal_options.direct_io = config.wal_direct_io;
    wal_options.durability = if config.wal_fsync {
        Durability::Fsync
    } else {
        Durability::UnsafeNoSync
    };
    let (wal, recovered) = Wal::open(wal_options)?;
    tracing::info!(
        wal_id = wal.id(),
        start = recovered.start_lsn,
        end = recovered.end_lsn,
        segments = recovered.segments,
        truncated_bytes = recovered.truncated_bytes,
        writes = wal_write_mode(config.wal_direct_io, wal.direct_io()),
        "write-ahead log opened"
    );
    Ok(wal)
}

/// How the WAL's segments are written, for the start-up log: what `--wal-direct-io` asked
/// for and what the segment the log opened got.
fn wal_write_mode(asked: bool, direct: bool) -> &'static str {
    match (asked, direct) {
        (_, true) => "O_DIRECT",
        (true, false) => "buffered: the file system refuses O_DIRECT",
        (false, false) => "buffered (--wal-direct-io false)",
    }
}

/// Cancels `stopped` once the WAL reports a failure or its writer ends (the one task
/// woken on every fsync in place of every open stream).
async fn watch_wal_stops(
    mut durable: tokio::sync::watch::Receiver<sluice_wal::DurableState>,
    stopped: CancellationToken,
) {
    while durable.borrow_and_update().failed.is_none() {
        if durable.changed().await.is_err() {
            break;
        }
    }
    stopped.cancel();
}
