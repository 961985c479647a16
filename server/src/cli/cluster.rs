//! `sluice cluster status` (reads the meta store directly: it needs etcd's
//! address, not a pod's) and `sluice cluster up` ([`super::cluster_up`]).

use clap::Subcommand;
use sluice_router::pod_record::now_ms;
use sluice_router::{Meta, PodRecord};
use sluice_server::etcd_access::EtcdAccess;
use sluice_server::{Result, ServerError};

use super::cluster_up::{self, UpArgs};

/// The cluster commands.
#[derive(Subcommand)]
pub enum ClusterCommand {
    /// Pods, their state and load.
    Status {
        /// The meta store: etcd://HOST:PORT (etcds:// for TLS).
        #[arg(long, env = "SLUICE_JOIN")]
        join: String,
        #[command(flatten)]
        etcd: EtcdAccess,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Start etcd, N pods and a router as local processes on loopback (development and
    /// tests; Ctrl-C stops them all, pods drained first).
    Up(UpArgs),
}

/// Runs a cluster command.
pub async fn run(command: ClusterCommand) -> anyhow::Result<()> {
    match command {
        ClusterCommand::Status { join, etcd, json } => {
            let pods = pods(&join, &etcd).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&pods)?);
            } else {
                print!("{}", render_status(&pods));
            }
            Ok(())
        }
        ClusterCommand::Up(args) => {
            super::init_tracing();
            cluster_up::run(args).await
        }
    }
}

/// A meta store error as the CLI reports it.
pub fn meta_error(e: sluice_router::RouterError) -> ServerError {
    ServerError::Unavailable(format!("meta store: {e}"))
}

/// Connects to the meta store at `join` (`etcd://HOST:PORT`, `etcds://` for TLS).
pub async fn connect_meta(join: &str, etcd: &EtcdAccess) -> Result<Meta> {
    Meta::connect(join, &etcd.options()?)
        .await
        .map_err(meta_error)
}

/// The registered pods.
pub async fn pods(join: &str, etcd: &EtcdAccess) -> Result<Vec<PodRecord>> {
    connect_meta(join, etcd)
        .await?
        .pods()
        .await
        .map_err(meta_error)
}

/// The status table: one line per pod.
pub fn render_status(pods: &[PodRecord]) -> String {
    let now = now_ms();
    let mut out = format!(
        "{:<20} {:<28} {:<9} {:>7} {:>10} {:>6} {:>10} {:>10} {:>7}\n",
        "POD", "ADDRESS", "STATE", "STREAMS", "IN MiB/s", "CPU", "WAL QUEUE", "MEMTABLE", "AGE ms"
    );
    for p in pods {
        let state = match p.state {
            sluice_router::PodState::Ready => "ready",
            sluice_router::PodState::Draining => "draining",
        };
        out.push_str(&format!(
            "{:<20} {:<28} {:<9} {:>7} {:>10.2} {:>6.2} {:>10} {:>10} {:>7}\n",
            p.id,
            p.addr,
            state,
            p.load.open_streams,
            p.load.ingress_bytes_per_sec / (1024.0 * 1024.0),
            p.load.cpu_cores,
            p.load.wal_queue_bytes,
            p.load.memtable_bytes,
            now - p.reported_at_ms
        ));
    }
    let streams: u64 = pods.iter().map(|p| p.load.open_streams).sum();
    out.push_str(&format!("{} pods, {streams} streams\n", pods.len()));
    out
}
