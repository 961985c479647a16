//! The warehouse's probes through `object_store`: PUT and GET throughput of 16 MiB objects
//! and the latency of small conditional (put-if-absent) PUTs, which Delta commits rely on.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::stats::{mb_per_s, millis, percentile};
use super::{Check, DoctorOptions, Verdict};
use crate::warehouse::Warehouse;

/// Size of each throughput object.
const OBJECT_BYTES: usize = 16 << 20;
/// Size of each conditional PUT.
const SMALL_BYTES: usize = 1024;

pub(super) async fn checks(opts: &DoctorOptions) -> Vec<Check> {
    let (store, root) = match open(opts) {
        Ok(opened) => opened,
        Err(e) => return vec![Check::error("warehouse", e)],
    };
    let prefix = format!(
        "_sluice_doctor/{}-{}",
        std::process::id(),
        chrono::Utc::now().timestamp_micros()
    );
    let mut checks = Vec::new();
    match throughput(store.as_ref(), &prefix, opts.objects).await {
        Ok((put, get)) => {
            checks.push(rate_check("warehouse PUT 16 MiB objects", put));
            checks.push(rate_check("warehouse GET 16 MiB objects", get));
        }
        Err(e) => checks.push(Check::error("warehouse PUT/GET", e)),
    }
    checks.push(conditional_puts(store.as_ref(), &prefix, opts.conditional_puts).await);
    cleanup(store.as_ref(), &root, &prefix, opts).await;
    checks
}

fn open(opts: &DoctorOptions) -> Result<(Arc<dyn ObjectStore>, PathBuf), String> {
    let warehouse = Warehouse::parse(
        opts.warehouse.as_deref(),
        &opts.data_dir.join("warehouse"),
        &crate::warehouse::S3Settings::default(),
    )
    .map_err(|e| e.to_string())?;
    let root = warehouse
        .root()
        .to_file_path()
        .map_err(|()| format!("{} is not a local folder", warehouse.root()))?;
    let store = LocalFileSystem::new_with_prefix(&root).map_err(|e| e.to_string())?;
    Ok((Arc::new(store), root))
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

/// Latency of `count` put-if-absent PUTs, and proof that a second one is refused.
async fn conditional_puts(store: &dyn ObjectStore, prefix: &str, count: usize) -> Check {
    const NAME: &str = "warehouse put-if-absent p99";
    let body = PutPayload::from(vec![0x7bu8; SMALL_BYTES]);
    let create = || PutOptions::from(PutMode::Create);
    let mut latencies: Vec<Duration> = Vec::with_capacity(count);
    for i in 0..count.max(1) {
        let path = ObjectPath::from(format!("{prefix}/log/{i:020}.json"));
        let t = Instant::now();
        if let Err(e) = store.put_opts(&path, body.clone(), create()).await {
            return Check::error(NAME, e);
        }
        latencies.push(t.elapsed());
    }
    let again = ObjectPath::from(format!("{prefix}/log/{:020}.json", 0));
    match store.put_opts(&again, body, create()).await {
        Err(object_store::Error::AlreadyExists { .. }) => {}
        Ok(_) => {
            return Check::new(
                NAME,
                "a second PUT of the same object succeeded".into(),
                "refused",
                Verdict::Fail,
            )
        }
        Err(e) => return Check::error(NAME, e),
    }
    let p50 = millis(percentile(&mut latencies, 50.0));
    let p99 = millis(percentile(&mut latencies, 99.0));
    Check::new(
        NAME,
        format!("{p99:.2} ms (p50 {p50:.2} ms)"),
        "< 50 ms",
        Verdict::at_most(p99, 50.0, 200.0),
    )
}

async fn cleanup(store: &dyn ObjectStore, root: &Path, prefix: &str, opts: &DoctorOptions) {
    let mut paths: Vec<ObjectPath> = (0..opts.objects.max(1))
        .map(|i| ObjectPath::from(format!("{prefix}/object-{i}")))
        .collect();
    paths.extend(
        (0..opts.conditional_puts.max(1))
            .map(|i| ObjectPath::from(format!("{prefix}/log/{i:020}.json"))),
    );
    for path in paths {
        if let Err(e) = store.delete(&path).await {
            tracing::debug!(%path, error = %e, "doctor could not remove a probe object");
        }
    }
    // The local store leaves empty folders behind; remove them too.
    let _ = std::fs::remove_dir_all(root.join(prefix));
    let _ = std::fs::remove_dir(root.join("_sluice_doctor"));
}
