//! The pod: everything one `sluice serve` process owns (catalog, auth, WAL,
//! sinks, streams) and its start-up sequence: open the catalog, create the
//! admin principal on first start, open the WAL, open every table's Delta log
//! to learn how far this WAL is committed, replay the rest, commit, serve.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_wal::{Durability, Wal, WalOptions};
use tokio::sync::Mutex as AsyncMutex;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::{generate_secret, hash_secret, Authenticator};
use crate::catalog::{Catalog, EtcdStore, PrincipalEntry, TableEntry};
use crate::cluster::load::{Levels, LoadCounters, LoadSampler};
use crate::config::{AuthMode, ServeConfig};
use crate::error::{Result, ServerError};
use crate::sink::SharedSink;
use crate::sink::{open_table, Sinks, TableSink};
use crate::streams::StreamRegistry;
use crate::warehouse::Warehouse;

/// File in the data dir holding the generated admin credentials (mode 0600).
pub const ADMIN_CREDENTIALS_FILE: &str = "admin-credentials";

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
    /// Ingress counters for the load report.
    pub load: LoadCounters,
    load_sampler: LoadSampler,
}

impl Pod {
    /// Starts a pod: recovery included, ready to serve when this returns.
    pub async fn start(config: ServeConfig) -> Result<Arc<Pod>> {
        config.sanitize()?;
        std::fs::create_dir_all(&config.data_dir)
            .map_err(|e| ServerError::io(format!("creating {}", config.data_dir.display()), e))?;
        let catalog = Arc::new(match &config.cluster {
            Some(cluster) => {
                let join = cluster.join.clone();
                let store = tokio::task::spawn_blocking(move || EtcdStore::connect(&join))
                    .await
                    .map_err(|e| ServerError::Internal(format!("catalog connect task: {e}")))??;
                Catalog::with_store(Box::new(store))?
            }
            None => Catalog::open(&config.data_dir)?,
        });
        if config.auth == AuthMode::OAuth {
            bootstrap_admin(&catalog, &config)?;
        } else {
            tracing::warn!(
                "AUTHENTICATION IS OFF (--auth none): anyone who can reach {} can write to every table",
                config.listen
            );
        }
        let auth = Arc::new(Authenticator::new(
            config.auth,
            catalog.clone(),
            config.token_ttl,
        )?);
        let mut wal_options = WalOptions::new(config.data_dir.join("wal"));
        wal_options.segment_bytes = config.wal_segment_bytes;
        wal_options.prepare_segments = config.wal_prepare_segments;
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
            "write-ahead log opened"
        );
        let warehouse = Warehouse::parse(
            config.warehouse.as_deref(),
            &config.data_dir.join("warehouse"),
            &config.s3,
        )?;
        let streams = Arc::new(StreamRegistry::default());
        let sinks = Sinks::new(
            wal.clone(),
            config.flush_interval,
            config.upkeep.clone(),
            streams.clone(),
        );
        for entry in catalog.tables()? {
            let sink = open_sink(&warehouse, &entry, &wal, config.flush_bytes).await?;
            sinks.insert(Arc::new(sink))?;
        }
        let pod = Arc::new(Pod {
            config,
            catalog,
            auth,
            wal,
            sinks,
            streams,
            warehouse,
            shutdown: CancellationToken::new(),
            stream_tasks: TaskTracker::new(),
            ddl: AsyncMutex::new(()),
            draining: CancellationToken::new(),
            load: LoadCounters::default(),
            load_sampler: LoadSampler::default(),
        });
        let replayed = crate::recovery::replay(&pod)?;
        if replayed.rows > 0 {
            tracing::info!(
                rows = replayed.rows,
                frames = replayed.frames,
                "replayed WAL records not yet in Delta"
            );
        }
        pod.sinks.flush_all().await?;
        Ok(pod)
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.is_cancelled()
    }

    /// Graceful stop: streams ack what is durable and end, every memtable is
    /// committed, the WAL is closed. After a drain (`drained`), the WAL, whose
    /// every frame is then in Delta, is deleted.
    pub async fn stop(&self, drained: bool) -> Result<()> {
        self.shutdown.cancel();
        self.stream_tasks.close();
        self.stream_tasks.wait().await;
        let rows = self.sinks.flush_all().await?;
        self.sinks.stop().await;
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

    /// How long streams get to move away when the pod drains (0 on a single node).
    pub fn drain_grace(&self) -> std::time::Duration {
        self.config
            .cluster
            .as_ref()
            .map(|c| c.drain_grace)
            .unwrap_or_default()
    }

    /// The load report published every second in cluster mode.
    pub fn load_report(&self) -> sluice_router::Load {
        let memtable: usize = self.sinks.all().iter().map(|s| s.memtable_bytes()).sum();
        let load = self.load_sampler.sample(
            &self.load,
            Levels {
                open_streams: self.streams.active_streams() as u64,
                wal_queue_bytes: self.wal.queued_bytes(),
                memtable_bytes: memtable as u64,
            },
        );
        // The HPA's per-pod metric (deploy/k8s/hpa.yaml).
        metrics::gauge!("sluice_pod_load_score").set(sluice_router::placement::score(&load, 0));
        load
    }

    /// The sink of `table`. A table another pod created after this one started
    /// (cluster mode: the catalog is shared) gets its sink opened on first use.
    pub async fn sink_for(&self, table: &str) -> Result<Option<SharedSink>> {
        if let Some(sink) = self.sinks.get(table) {
            return Ok(Some(sink));
        }
        let Some(entry) = self.catalog.table(table)? else {
            return Ok(None);
        };
        let _ddl = self.ddl.lock().await;
        if let Some(sink) = self.sinks.get(table) {
            return Ok(Some(sink));
        }
        let sink =
            Arc::new(open_sink(&self.warehouse, &entry, &self.wal, self.config.flush_bytes).await?);
        self.sinks.insert(sink.clone())?;
        tracing::info!(table = %entry.full_name, "opened the sink of a table created elsewhere");
        Ok(Some(sink))
    }
}

/// Opens the Delta table of a catalog entry as a sink.
pub async fn open_sink(
    warehouse: &Warehouse,
    entry: &TableEntry,
    wal: &Wal,
    flush_bytes: usize,
) -> Result<TableSink> {
    let url = url::Url::parse(&entry.storage_location)
        .map_err(|e| ServerError::Internal(format!("bad location of {}: {e}", entry.full_name)))?;
    let (delta, committed) = open_table(warehouse.open(&url).await?, wal.id()).await?;
    Ok(TableSink::new(
        entry.full_name.clone(),
        entry.schema()?,
        delta,
        wal.clone(),
        committed,
        flush_bytes,
        entry.added_columns(),
    ))
}

fn bootstrap_admin(catalog: &Catalog, config: &ServeConfig) -> Result<()> {
    if catalog.has_principals()? {
        if config.bootstrap_principal.is_some() {
            tracing::info!("principals exist already; --bootstrap-principal ignored");
        }
        return Ok(());
    }
    let (client_id, secret, generated) = match &config.bootstrap_principal {
        Some((id, secret)) => (id.clone(), secret.clone(), false),
        None => ("sluice-admin".to_string(), generate_secret(), true),
    };
    let (salt, secret_hash) = hash_secret(&secret);
    let added = catalog.add_principal(PrincipalEntry {
        client_id: client_id.clone(),
        name: "admin".into(),
        salt,
        secret_hash,
        admin: true,
    });
    match added {
        Ok(()) => {}
        // Another pod of the cluster bootstrapped the shared catalog first.
        Err(ServerError::AlreadyExists(_)) if config.cluster.is_some() => return Ok(()),
        Err(e) => return Err(e),
    }
    if generated {
        let path = config.data_dir.join(ADMIN_CREDENTIALS_FILE);
        write_private(
            &path,
            &format!("SLUICE_CLIENT_ID={client_id}\nSLUICE_CLIENT_SECRET={secret}\n"),
        )?;
        println!(
            "Created admin principal (shown once; also stored in {}):\n  SLUICE_CLIENT_ID={client_id}\n  SLUICE_CLIENT_SECRET={secret}",
            path.display()
        );
    } else {
        tracing::info!(client_id, "created bootstrap admin principal");
    }
    Ok(())
}

fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| ServerError::io(format!("creating {}", path.display()), e))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| ServerError::io(format!("writing {}", path.display()), e))
}

/// Reads `SLUICE_CLIENT_ID` / `SLUICE_CLIENT_SECRET` from an admin
/// credentials file.
pub fn read_admin_credentials(data_dir: &Path) -> Option<(String, String)> {
    let text =
        std::fs::read_to_string(PathBuf::from(data_dir).join(ADMIN_CREDENTIALS_FILE)).ok()?;
    let mut id = None;
    let mut secret = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("SLUICE_CLIENT_ID=") {
            id = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("SLUICE_CLIENT_SECRET=") {
            secret = Some(v.trim().to_string());
        }
    }
    Some((id?, secret?))
}
