//! The warehouse's probes through `object_store`: PUT and GET throughput of 16 MiB objects
//! and the latency of small conditional (put-if-absent) PUTs, which Delta commits rely on.
//!
//! A local warehouse is probed through `object_store`'s local file system; an `s3://`
//! warehouse through the same S3 client and settings the server's Delta tables use
//! ([`crate::warehouse::s3::client_builder`]: flags, `AWS_*` environment, conditional put
//! `etag`), with few retries, so a dead endpoint is reported instead of retried for
//! minutes. Every stage is bounded in time. A warehouse that cannot be reached (no answer,
//! no such bucket, refused credentials) gives one failed `warehouse reachable` row with
//! the store's message, and no further probe runs. Probe objects live under
//! `{warehouse}/_sluice_doctor/{pid}-{µs}/` and are removed by listing that prefix.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::prefix::PrefixStore;
use object_store::{BackoffConfig, ObjectStore, ObjectStoreExt, PutMode, PutPayload, RetryConfig};

use super::stats::{mb_per_s, millis, percentile};
use super::{Check, DoctorOptions, Verdict};
use crate::warehouse::Warehouse;

/// Size of each throughput object.
const OBJECT_BYTES: usize = 16 << 20;
/// Size of each conditional PUT.
const SMALL_BYTES: usize = 1024;
/// Longest wait for the first answer of the warehouse.
const REACH_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest time one probe (all its requests) may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(120);
/// The folder under the warehouse root that holds probe objects.
const PROBE_FOLDER: &str = "_sluice_doctor";

pub(super) async fn checks(opts: &DoctorOptions) -> Vec<Check> {
    let (store, local_root) = match open(opts) {
        Ok(opened) => opened,
        Err(e) => return vec![Check::error("warehouse reachable", e)],
    };
    let store = store.as_ref();
    let prefix = format!(
        "{PROBE_FOLDER}/{}-{}",
        std::process::id(),
        chrono::Utc::now().timestamp_micros()
    );
    if let Err(e) = bounded(REACH_TIMEOUT, reachable(store, &prefix)).await {
        return vec![Check::error("warehouse reachable", e)];
    }
    let mut checks = vec![Check::new(
        "warehouse reachable",
        "answers".into(),
        "answers",
        Verdict::Pass,
    )];
    match bounded(PROBE_TIMEOUT, throughput(store, &prefix, opts.objects)).await {
        Ok((put, get)) => {
            checks.push(rate_check("warehouse PUT 16 MiB objects", put));
            checks.push(rate_check("warehouse GET 16 MiB objects", get));
        }
        Err(e) => checks.push(Check::error("warehouse PUT/GET", e)),
    }
    checks.push(conditional_puts(store, &prefix, opts.conditional_puts).await);
    if let Err(e) = bounded(PROBE_TIMEOUT, cleanup(store, &prefix)).await {
        checks.push(Check::error("warehouse probe cleanup", e));
    }
    if let Some(root) = local_root {
        // The local store leaves empty folders behind; remove them too.
        let _ = std::fs::remove_dir_all(root.join(&prefix));
        let _ = std::fs::remove_dir(root.join(PROBE_FOLDER));
    }
    checks
}

/// The warehouse root as an object store (paths relative to the root), and the root
/// folder when it is local.
fn open(
    opts: &DoctorOptions,
) -> Result<(Arc<dyn ObjectStore>, Option<std::path::PathBuf>), String> {
    let warehouse = Warehouse::parse(
        opts.warehouse.as_deref(),
        &opts.data_dir.join("warehouse"),
        &opts.s3,
    )
    .map_err(|e| e.to_string())?;
    let root = warehouse.root();
    if root.scheme() == "file" {
        let folder = root
            .to_file_path()
            .map_err(|()| format!("{root} is not a local folder"))?;
        let store = LocalFileSystem::new_with_prefix(&folder).map_err(|e| e.to_string())?;
        return Ok((Arc::new(store), Some(folder)));
    }
    let store = crate::warehouse::s3::client_builder(root, warehouse.storage_options())
        .with_retry(RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: 2,
            retry_timeout: Duration::from_secs(10),
        })
        .build()
        .map_err(|e| e.to_string())?;
    let prefix = ObjectPath::from_url_path(root.path()).map_err(|e| e.to_string())?;
    Ok((Arc::new(PrefixStore::new(store, prefix)), None))
}

/// Runs `probe`, turning its error or a timeout into a message.
async fn bounded<T, E: std::fmt::Display>(
    limit: Duration,
    probe: impl Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(limit, probe).await {
        Ok(result) => result.map_err(|e| super::store_error::readable(&e.to_string())),
        Err(_) => Err(format!("no answer within {} s", limit.as_secs())),
    }
}

/// One listing of the probe prefix: answers whether the endpoint, the bucket and the
/// credentials work before any object is written.
async fn reachable(store: &dyn ObjectStore, prefix: &str) -> Result<(), object_store::Error> {
    store
        .list_with_delimiter(Some(&ObjectPath::from(prefix)))
        .await
        .map(|_| ())
}

fn rate_check(name: &str, mbps: f64) -> Check {
    Check::new(
        name,
        format!("{mbps:.0} MB/s"),
        ">= 100 MB/s",
        Verdict::at_least(mbps, 100.0, 20.0),
    )
}

/// MB/s of PUTting `count` objects, then of GETting them back.
async fn throughput(
    store: &dyn ObjectStore,
    prefix: &str,
    count: usize,
) -> Result<(f64, f64), object_store::Error> {
    let body = PutPayload::from(vec![0x3cu8; OBJECT_BYTES]);
    let count = count.max(1);
    let started = Instant::now();
    for i in 0..count {
        let path = ObjectPath::from(format!("{prefix}/object-{i}"));
        store.put(&path, body.clone()).await?;
    }
    let put = mb_per_s((count * OBJECT_BYTES) as u64, started.elapsed());
    let started = Instant::now();
    let mut read = 0u64;
    for i in 0..count {
        let path = ObjectPath::from(format!("{prefix}/object-{i}"));
        read += store.get(&path).await?.bytes().await?.len() as u64;
    }
    let get = mb_per_s(read, started.elapsed());
    Ok((put, get))
}

/// What the put-if-absent probe saw.
enum Refusal {
    /// The second PUT of an existing object was refused, as Delta commits need.
    Refused(Vec<Duration>),
    /// The second PUT succeeded: concurrent commits would overwrite each other.
    Overwrote,
}

/// Latency of `count` put-if-absent PUTs, and proof that a second one is refused.
async fn conditional_puts(store: &dyn ObjectStore, prefix: &str, count: usize) -> Check {
    const NAME: &str = "warehouse put-if-absent p99";
    match bounded(PROBE_TIMEOUT, put_if_absent(store, prefix, count)).await {
        Ok(Refusal::Refused(mut latencies)) => {
            let p50 = millis(percentile(&mut latencies, 50.0));
            let p99 = millis(percentile(&mut latencies, 99.0));
            Check::new(
                NAME,
                format!("{p99:.2} ms (p50 {p50:.2} ms)"),
                "< 50 ms",
                Verdict::at_most(p99, 50.0, 200.0),
            )
        }
        Ok(Refusal::Overwrote) => Check::new(
            NAME,
            "a second PUT of the same object succeeded".into(),
            "refused",
            Verdict::Fail,
        ),
        Err(e) => Check::error(NAME, e),
    }
}

async fn put_if_absent(
    store: &dyn ObjectStore,
    prefix: &str,
    count: usize,
) -> Result<Refusal, object_store::Error> {
    let body = PutPayload::from(vec![0x7bu8; SMALL_BYTES]);
    let path = |i: usize| ObjectPath::from(format!("{prefix}/log/{i:020}.json"));
    let mut latencies: Vec<Duration> = Vec::with_capacity(count);
    for i in 0..count.max(1) {
        let t = Instant::now();
        store
            .put_opts(&path(i), body.clone(), PutMode::Create.into())
            .await?;
        latencies.push(t.elapsed());
    }
    match store.put_opts(&path(0), body, PutMode::Create.into()).await {
        Err(object_store::Error::AlreadyExists { .. }) => Ok(Refusal::Refused(latencies)),
        Ok(_) => Ok(Refusal::Overwrote),
        Err(e) => Err(e),
    }
}

/// Deletes every object under the probe prefix.
async fn cleanup(store: &dyn ObjectStore, prefix: &str) -> Result<(), object_store::Error> {
    let objects: Vec<_> = store
        .list(Some(&ObjectPath::from(prefix)))
        .try_collect()
        .await?;
    for object in objects {
        store.delete(&object.location).await?;
    }
    Ok(())
}
