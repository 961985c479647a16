//! The pod: the handles of everything one `sluice serve` process owns (catalog,
//! auth, WAL, sinks, streams) and what the services ask of them. Its lifecycle
//! (start-up with replay, graceful stop) is [`start`].

mod keepers;
mod start;

pub use keepers::WalKeepers;

use std::sync::Arc;

use sluice_wal::Wal;
use tokio::sync::Mutex as AsyncMutex;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::Authenticator;
use crate::catalog::{Catalog, TableEntry};
use crate::cluster::load::{LoadCounters, LoadSource};
use crate::cluster::roles::CommitRoles;
use crate::commit::HandOffRoute;
use crate::config::ServeConfig;
use crate::error::{Result, ServerError};
use crate::journal::streams::StreamRegistry;
use crate::pstreams::PersistentStreams;
use crate::sink::{open_table, SharedSink, SinkOptions, Sinks, TableSink};
use crate::warehouse::Warehouse;

/// The pod id of a single-node pod (no `--join`): the owner of its persistent streams.
pub const SINGLE_NODE_POD_ID: &str = "single-node";

/// Everything a running pod owns.
pub struct Pod {
    /// Configuration it was started with.
    pub config: ServeConfig,
    /// Tables, principals, keys.
    pub catalog: Arc<Catalog>,
    /// Credential checks.
    pub auth: Arc<Authenticator>,
    /// The write-ahead log.
    pub wal: Wal,
    /// Table sinks.
    pub sinks: Arc<Sinks>,
    /// Streams with frames in the WAL.
    pub streams: Arc<StreamRegistry>,
    /// Persistent streams: their registry, holders and WAL watermarks.
    pub pstreams: Arc<PersistentStreams>,
    /// Where tables live.
    pub warehouse: Warehouse,
    /// Cancelled when the pod starts shutting down.
    pub shutdown: CancellationToken,
    /// The stream tasks, awaited at shutdown.
    pub stream_tasks: TaskTracker,
    /// Serializes catalog changes (create/drop).
    pub ddl: AsyncMutex<()>,
    /// Cancelled when the pod starts draining: streams get `CloseStreamSignal`.
    pub draining: CancellationToken,
    /// Cancelled once the WAL fails or closes, so streams with nothing to ack end then
    /// without waking on every fsync (`Acks::pending_durable_changed`).
    pub wal_stopped: CancellationToken,
    /// Ingress counters for the load report.
    pub load: Arc<LoadCounters>,
    /// In a cluster: this pod's committer roles and the route of its
    /// hand-offs to each table's elected committer (None: single node).
    pub roles: Option<Arc<CommitRoles>>,
    /// REST idempotency keys seen within the window (rebuilt by replay, kept by purges).
    pub idempotency: Arc<crate::rest::idempotency::IdempotencyIndex>,
    /// MQTT QoS 2 publishes received and not released (rebuilt by replay, kept by purges).
    pub qos2: Arc<crate::journal::Qos2Ledger>,
    /// In a cluster: the keys' claims in etcd, shared by every pod (None: single node).
    pub idem_claims: Option<Arc<crate::cluster::idem_claims::ClusterKeys>>,
    /// Since when the warehouse has been unreachable (probed in the background).
    pub warehouse_watch: Arc<crate::health::WarehouseWatch>,
}

impl Pod {
    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.is_cancelled()
    }

    /// How long streams get to move away when the pod drains (0 on a single node).
    pub fn drain_grace(&self) -> std::time::Duration {
        self.config
            .cluster
            .as_ref()
            .map(|c| c.drain_grace)
            .unwrap_or_default()
    }

    /// This pod's id: the cluster's `--pod-id`, or [`SINGLE_NODE_POD_ID`].
    pub fn pod_id(&self) -> &str {
        self.pstreams.pod_id()
    }

    /// What `/healthz` answers: the WAL has not failed, the warehouse has not been
    /// unreachable for longer than `--warehouse-unhealthy-after`.
    pub fn health(&self) -> crate::health::HealthReport {
        let wal = self.wal.subscribe().borrow().failed.clone();
        crate::health::assess(crate::health::HealthInputs {
            wal_failed: wal.as_deref(),
            warehouse_down: self.warehouse_watch.down_for(),
            warehouse_threshold: self.config.warehouse_unhealthy_after,
        })
    }

    /// What the cluster's load report reads from this pod.
    pub fn load_source(&self) -> LoadSource {
        LoadSource {
            counters: self.load.clone(),
            wal: self.wal.clone(),
            sinks: self.sinks.clone(),
            streams: self.streams.clone(),
        }
    }

    /// What opening a sink of this pod needs.
    pub fn sink_env(&self) -> SinkEnv<'_> {
        SinkEnv {
            warehouse: &self.warehouse,
            wal: &self.wal,
            config: &self.config,
            roles: self.roles.as_ref(),
        }
    }

    /// The sink of `table`. A table another pod created after this one started
    /// (cluster mode: the catalog is shared) gets its sink opened on first use.
    pub async fn sink_for(&self, table: &str) -> Result<Option<SharedSink>> {
        if let Some(sink) = self.sinks.get(table) {
            self.apply_schema(&sink).await?;
            return Ok(Some(sink));
        }
        let Some(entry) = self.catalog.table(table)? else {
            return Ok(None);
        };
        let _ddl = self.ddl.lock().await;
        if let Some(sink) = self.sinks.get(table) {
            return Ok(Some(sink));
        }
        let entry =
            crate::evolve::settle(&self.catalog, &self.warehouse, entry, self.pod_id()).await?;
        let sink = Arc::new(open_sink(self.sink_env(), &entry).await?);
        self.sinks.insert(sink.clone())?;
        tracing::info!(table = %entry.full_name, "opened the sink of a table created elsewhere");
        Ok(Some(sink))
    }

    /// In a cluster: applies, once a second, the catalog's columns of every
    /// open sink whose table was altered on another pod, so a stream here
    /// that writes a column the alter dropped or renamed is ended
    /// (`ingest::stream`) without waiting for a new stream of the table.
    pub fn spawn_schema_watch(self: &Arc<Self>) {
        let pod = Arc::downgrade(self);
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tick.tick() => {}
                }
                let Some(pod) = pod.upgrade() else { return };
                for sink in pod.sinks.all() {
                    if let Err(e) = pod.apply_schema(&sink).await {
                        tracing::warn!(table = sink.name(), "applying the catalog's schema: {e}");
                    }
                }
            }
        });
    }

    /// Applies the catalog's columns of `sink`'s table when they differ from
    /// the sink's (an alter on another pod, seen through the catalog watch),
    /// so a stream opening now compiles against the table as it is.
    async fn apply_schema(&self, sink: &SharedSink) -> Result<()> {
        let Some(entry) = self.catalog.table(sink.name())? else {
            return Ok(());
        };
        sink.set_auto_evolve(entry.auto_evolve());
        if entry.columns == sink.schema().to_sql() {
            return Ok(());
        }
        let _ddl = self.ddl.lock().await;
        let Some(entry) = self.catalog.table(sink.name())? else {
            return Ok(());
        };
        let schema = entry.schema()?;
        if *sink.schema() != schema {
            sink.evolve(schema).await?;
            tracing::info!(table = %entry.full_name, schema_version = entry.schema_version, columns = %entry.columns, "applied the table's new schema");
        }
        Ok(())
    }
}

/// What opening a sink needs from its pod.
#[derive(Clone, Copy)]
pub struct SinkEnv<'a> {
    /// Where tables live.
    pub warehouse: &'a Warehouse,
    /// The pod's WAL.
    pub wal: &'a Wal,
    /// The pod's configuration.
    pub config: &'a ServeConfig,
    /// The cluster's committer roles (None: single node, in-process committer).
    pub roles: Option<&'a Arc<CommitRoles>>,
}

/// Opens the Delta table of a catalog entry as a sink: with its own
/// in-process committer on a single node, routed to the table's elected
/// committer in a cluster.
pub async fn open_sink(env: SinkEnv<'_>, entry: &TableEntry) -> Result<TableSink> {
    let SinkEnv {
        warehouse,
        wal,
        config,
        roles,
    } = env;
    let url = url::Url::parse(&entry.storage_location)
        .map_err(|e| ServerError::Internal(format!("bad location of {}: {e}", entry.full_name)))?;
    let (delta, committed) = open_table(warehouse.open(&url).await?, wal.id()).await?;
    let options = SinkOptions {
        flush_bytes: config.flush_bytes,
        added: entry.added_columns(),
        pod_id: config
            .cluster
            .as_ref()
            .map_or_else(|| "single-node".to_string(), |c| c.pod_id.clone()),
        commit: config.committer(),
        elected: roles.map(|r| Arc::new(r.clone()) as Arc<dyn HandOffRoute>),
    };
    let sink = TableSink::new(
        entry.full_name.clone(),
        entry.schema()?,
        delta,
        wal.clone(),
        committed,
        options,
    );
    sink.set_auto_evolve(entry.auto_evolve());
    Ok(sink)
}
