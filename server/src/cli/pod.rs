//! `sluice pod drain POD`: asks a pod, through the meta store, to drain, and
//! waits until it has left the cluster. `sluice pod forget POD`: clears a pod's
//! ownership of persistent streams and deletes the REST idempotency-key claims it left
//! pending (a pod whose volume is lost for good).

use std::time::Duration;

use clap::Subcommand;
use sluice_server::cluster::idem_claims::settle_pending;
use sluice_server::etcd_access::EtcdAccess;
use sluice_server::pstreams::forget::forget_pod;
use sluice_server::pstreams::EtcdStreamStore;
use sluice_server::{Result, ServerError};

use super::cluster::{connect_meta, meta_error};

/// The commands on one pod of a cluster.
#[derive(Subcommand)]
pub enum PodCommand {
    /// Drain a pod: it stops taking streams, moves its producers to other pods, commits
    /// and exits with an empty WAL. Waits until it has left the cluster.
    Drain {
        /// Pod id (see `sluice cluster status`).
        pod: String,
        /// The meta store: etcd://HOST:PORT (etcds:// for TLS).
        #[arg(long, env = "SLUICE_JOIN")]
        join: String,
        #[command(flatten)]
        etcd: EtcdAccess,
        /// Return at once instead of waiting for the pod to leave.
        #[arg(long)]
        no_wait: bool,
        /// Give up waiting after this long.
        #[arg(long, default_value = "120s", value_parser = humantime::parse_duration)]
        timeout: Duration,
    },
    /// Forget a pod whose volume is lost for good: its persistent streams lose their owner,
    /// so they resume on other pods from the watermark in Delta. The records only that pod's
    /// WAL held (acked, not yet committed) are lost; REST idempotency keys it left pending
    /// are released (a retry writes its request). Refused while the pod is registered.
    Forget {
        /// Pod id.
        pod: String,
        /// The meta store: etcd://HOST:PORT (etcds:// for TLS).
        #[arg(long, env = "SLUICE_JOIN")]
        join: String,
        #[command(flatten)]
        etcd: EtcdAccess,
    },
}

/// Runs a pod command.
pub async fn run(command: PodCommand) -> anyhow::Result<()> {
    let (pod, join, etcd, no_wait, timeout) = match command {
        PodCommand::Drain {
            pod,
            join,
            etcd,
            no_wait,
            timeout,
        } => (pod, join, etcd, no_wait, timeout),
        PodCommand::Forget { pod, join, etcd } => {
            let (cleared, keys) = forget(&join, &etcd, &pod).await?;
            println!(
                "{pod} forgotten: {cleared} persistent stream(s) released, \
                 {keys} pending idempotency key(s) released"
            );
            return Ok(());
        }
    };
    let wait = (!no_wait).then_some(timeout);
    let mut progress = super::progress::Progress::start();
    let outcome = drain(&join, &etcd, &pod, wait, &mut progress).await?;
    if no_wait {
        println!("drain of {pod} requested");
    } else if outcome.left {
        progress.finish(&format!(
            "drained {pod}: it left the cluster ({} streams and {} of memtables when asked)",
            outcome.streams_at_request,
            super::progress::mb(outcome.memtable_at_request as f64)
        ));
        println!("{pod} drained and left the cluster");
    } else {
        progress.finish(&format!(
            "drain of {pod}: still registered after the timeout"
        ));
        anyhow::bail!("{pod} is still registered after {timeout:?}");
    }
    Ok(())
}

/// What a drain saw.
pub struct DrainOutcome {
    /// Whether the pod left the cluster within the timeout.
    pub left: bool,
    /// Streams open on it when the drain was requested.
    pub streams_at_request: u64,
    /// Its memtable bytes then.
    pub memtable_at_request: u64,
}

/// Asks pod `id` to drain; with `wait`, returns once it has left (or after `timeout`),
/// showing its streams and memtables from its load reports meanwhile.
pub async fn drain(
    join: &str,
    etcd: &EtcdAccess,
    id: &str,
    wait: Option<Duration>,
    progress: &mut super::progress::Progress,
) -> Result<DrainOutcome> {
    let meta = connect_meta(join, etcd).await?;
    let by = super::operator(etcd.etcd_user.as_deref());
    let before = meta.pods().await.map_err(meta_error)?;
    let load = before
        .iter()
        .find(|p| p.id == id)
        .map(|p| p.load)
        .unwrap_or_default();
    meta.request_drain(id, &by).await.map_err(meta_error)?;
    let mut outcome = DrainOutcome {
        left: false,
        streams_at_request: load.open_streams,
        memtable_at_request: load.memtable_bytes,
    };
    let Some(timeout) = wait else {
        return Ok(outcome);
    };
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        let pods = meta.pods().await.map_err(meta_error)?;
        let Some(pod) = pods.iter().find(|p| p.id == id) else {
            outcome.left = true;
            return Ok(outcome);
        };
        progress.update(&format!(
            "draining {id}: {:?}, {} streams open, {} in memtables, {} WAL bytes queued",
            pod.state,
            pod.load.open_streams,
            super::progress::mb(pod.load.memtable_bytes as f64),
            pod.load.wal_queue_bytes
        ));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(outcome)
}

/// Clears pod `id`'s ownership of persistent streams and deletes the idempotency-key
/// claims it left pending; refused while `id` is registered (a live pod releases its
/// streams itself). Returns how many streams it owned and how many claims were deleted.
pub async fn forget(join: &str, etcd: &EtcdAccess, id: &str) -> Result<(usize, usize)> {
    let meta = connect_meta(join, etcd).await?;
    if meta
        .pods()
        .await
        .map_err(meta_error)?
        .iter()
        .any(|p| p.id == id)
    {
        return Err(ServerError::FailedPrecondition(format!(
            "pod {id} is registered: a live pod releases its streams itself (drain it); \
             forget only a pod that will not come back"
        )));
    }
    let (_, keys) = settle_pending(&meta, id, &Default::default()).await?;
    let streams = forget_pod(&EtcdStreamStore::new(meta), id).await?;
    Ok((streams, keys))
}
