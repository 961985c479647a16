//! A pod's membership: its record in the meta store, held under a lease and rewritten with a
//! fresh load report every [`REPORT_INTERVAL`]. If the pod dies, the lease expires after
//! [`LEASE_TTL_SECS`] and etcd deletes the record, so routers stop placing on it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::error::Result;
use crate::meta::Meta;
use crate::pod_record::{now_ms, Load, PodAddrs, PodRecord, PodState};

/// How often the load report is rewritten (and the lease kept alive).
pub const REPORT_INTERVAL: Duration = Duration::from_secs(1);
/// Lease time-to-live: a pod silent this long is gone.
pub const LEASE_TTL_SECS: i64 = 5;

/// A live registration; dropping it stops the reports (the lease then expires).
pub struct Registration {
    meta: Meta,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

struct Shared {
    record: Mutex<PodRecord>,
    lease: Mutex<i64>,
    wake: Notify,
}

impl Registration {
    /// Registers pod `id` at `addrs` (its URL and front doors) and starts reporting
    /// `load()` every second.
    pub async fn start(
        meta: Meta,
        id: String,
        addrs: PodAddrs,
        load: impl Fn() -> Load + Send + 'static,
    ) -> Result<Registration> {
        meta.clear_drain(&id).await?;
        let lease = meta.client().lease_grant(LEASE_TTL_SECS).await?;
        let record = PodRecord {
            id,
            addr: addrs.url,
            state: PodState::Ready,
            load: load(),
            reported_at_ms: now_ms(),
            mqtt_addr: addrs.mqtt,
            kafka_addr: addrs.kafka,
        };
        meta.put_pod(&record, lease).await?;
        tracing::info!(pod = %record.id, addr = %record.addr, lease, "registered in the meta store");
        let shared = Arc::new(Shared {
            record: Mutex::new(record),
            lease: Mutex::new(lease),
            wake: Notify::new(),
        });
        let task = tokio::spawn(report_loop(meta.clone(), shared.clone(), load));
        Ok(Registration { meta, shared, task })
    }

    /// Marks the pod draining and publishes that at once.
    pub async fn set_draining(&self) -> Result<()> {
        let (record, lease) = {
            let mut r = lock(&self.shared.record);
            r.state = PodState::Draining;
            r.reported_at_ms = now_ms();
            (r.clone(), *lock(&self.shared.lease))
        };
        self.meta.put_pod(&record, lease).await?;
        self.shared.wake.notify_one();
        Ok(())
    }

    /// Stops reporting and revokes the lease, which removes the record at once.
    pub async fn deregister(&self) -> Result<()> {
        self.task.abort();
        let lease = *lock(&self.shared.lease);
        self.meta.client().lease_revoke(lease).await?;
        Ok(())
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn report_loop(meta: Meta, shared: Arc<Shared>, load: impl Fn() -> Load) {
    let mut ticker = tokio::time::interval(REPORT_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shared.wake.notified() => {}
        }
        let record = {
            let mut r = lock(&shared.record);
            r.load = load();
            r.reported_at_ms = now_ms();
            r.clone()
        };
        if let Err(e) = report_once(&meta, &shared, &record).await {
            tracing::warn!(pod = %record.id, "load report failed: {e}");
        }
    }
}

/// Keeps the lease alive and rewrites the record; if the lease is gone (etcd lost us for
/// longer than the TTL) a new one is granted.
async fn report_once(meta: &Meta, shared: &Shared, record: &PodRecord) -> Result<()> {
    let lease = *lock(&shared.lease);
    let client = meta.client();
    let alive = client.lease_keep_alive(lease).await? > 0;
    let lease = if alive {
        lease
    } else {
        let fresh = client.lease_grant(LEASE_TTL_SECS).await?;
        tracing::warn!(pod = %record.id, old = lease, new = fresh, "lease expired; registered again");
        *lock(&shared.lease) = fresh;
        fresh
    };
    meta.put_pod(record, lease).await
}
