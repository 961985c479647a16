//! The pod's status page (`GET /`): the pod's own `/metrics` read back into a
//! [`sluice_status::PodSnapshot`], a ring of the last 15 minutes filled by a sampler every
//! [`sluice_status::history::SAMPLE_EVERY`], and the page rendered from both. The HTTP
//! handler (`http::status`) only checks the caller ([`session`]) and answers what
//! [`StatusService::page`] renders. Also [`publish_gauges`]: the levels set just before
//! `/metrics` (or a snapshot) is rendered.

pub mod session;

use std::sync::{Arc, Mutex};

use sluice_status::page::PageInput;
use sluice_status::prom::Samples;
use sluice_status::snapshot::PodView;
use sluice_status::{ClusterSnapshot, History, PodSnapshot};

use crate::pod::Pod;

/// Sets the gauges that are read, not counted: health, readiness, draining, WAL durable
/// position and disk space, memtables and commit lag per table, process CPU seconds.
pub fn publish_gauges(pod: &Pod) {
    pod.health(); // sets sluice_healthy and sluice_warehouse_unreachable_seconds
    crate::health::disk::publish(&pod.config.data_dir.join(crate::data_dir::WAL_DIR));
    metrics::gauge!("sluice_ready").set(if pod.is_shutting_down() { 0.0 } else { 1.0 });
    metrics::gauge!(sluice_status::snapshot::DRAINING).set(if pod.draining.is_cancelled() {
        1.0
    } else {
        0.0
    });
    metrics::gauge!("sluice_wal_durable_lsn").set(pod.wal.durable_lsn() as f64);
    if let Some(cpu) = crate::cluster::load::process_cpu_seconds() {
        metrics::gauge!(sluice_status::snapshot::CPU_SECONDS).set(cpu);
    }
    crate::sink::publish_table_gauges(&pod.sinks);
}

/// The page's state on one pod.
pub struct StatusService {
    pod: Arc<Pod>,
    history: Mutex<History>,
}

impl StatusService {
    /// A service with an empty history.
    pub fn new(pod: Arc<Pod>) -> Arc<StatusService> {
        Arc::new(StatusService {
            pod,
            history: Mutex::new(History::default()),
        })
    }

    /// This pod's snapshot now (its metrics rendered and read back).
    pub fn snapshot(&self) -> ClusterSnapshot {
        publish_gauges(&self.pod);
        let view = match Samples::parse(&crate::metrics_export::render()) {
            Ok(samples) => PodView::Seen(PodSnapshot::from_samples(self.pod.pod_id(), &samples)),
            Err(e) => PodView::Unreachable {
                id: self.pod.pod_id().to_string(),
                state: "unknown".into(),
                reason: e.to_string(),
            },
        };
        ClusterSnapshot { pods: vec![view] }
    }

    /// Adds a snapshot to the history.
    pub fn sample(&self) {
        let snapshot = self.snapshot();
        self.history().push(now_secs(), snapshot);
    }

    fn history(&self) -> std::sync::MutexGuard<'_, History> {
        self.history.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Samples every [`sluice_status::history::SAMPLE_EVERY`] until the pod shuts down.
    pub async fn run_sampler(self: Arc<Self>) {
        let mut ticker = tokio::time::interval(sluice_status::history::SAMPLE_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = self.pod.shutdown.cancelled() => return,
                _ = ticker.tick() => self.sample(),
            }
        }
    }

    /// The page now.
    pub fn page(&self) -> String {
        let current = self.snapshot();
        let history = self.history();
        sluice_status::page::render(&PageInput {
            scope: format!("pod {}", self.pod.pod_id()),
            current: &current,
            history: &history,
            now: now_secs(),
        })
    }
}

/// Unix seconds now.
pub fn now_secs() -> f64 {
    sluice_router::pod_record::now_ms() as f64 / 1000.0
}
