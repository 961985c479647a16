//! The warehouse probe behind `/healthz`: a background task lists the warehouse root
//! (one LIST on S3, a directory read locally) every probe interval, each try bounded by
//! a timeout, and remembers since when every probe has failed. A success clears it.
//! The gauge `sluice_warehouse_unreachable_seconds` says how long (0 when reachable),
//! as of the last `/healthz` or `/metrics` request.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use deltalake::logstore::LogStore;
use object_store::ObjectStore;
use tokio_util::sync::CancellationToken;

use crate::error::Result;
use crate::warehouse::Warehouse;

/// Since when the warehouse has failed every probe, and the last error.
#[derive(Default)]
pub struct WarehouseWatch {
    down: Mutex<Option<(Instant, String)>>,
}

impl WarehouseWatch {
    /// How long the warehouse has been unreachable, with the last error (None: reachable);
    /// also sets the gauge.
    pub fn down_for(&self) -> Option<(Duration, String)> {
        let down = self
            .state()
            .as_ref()
            .map(|(since, error)| (since.elapsed(), error.clone()));
        let seconds = down.as_ref().map_or(0.0, |(d, _)| d.as_secs_f64());
        metrics::gauge!("sluice_warehouse_unreachable_seconds").set(seconds);
        down
    }

    /// Records one probe's outcome.
    pub fn record(&self, outcome: std::result::Result<(), String>) {
        let mut down = self.state();
        match outcome {
            Ok(()) => {
                if down.take().is_some() {
                    tracing::info!("the warehouse is reachable again");
                }
            }
            Err(error) => match down.as_mut() {
                Some((_, last)) => *last = error,
                None => {
                    tracing::warn!("the warehouse is unreachable: {error}");
                    *down = Some((Instant::now(), error));
                }
            },
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Option<(Instant, String)>> {
        self.down.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Probes `warehouse` every `interval` (each try bounded by `interval`, at least 1 s)
    /// until `stop` is cancelled.
    pub fn spawn(
        self: &Arc<Self>,
        warehouse: &Warehouse,
        interval: Duration,
        stop: CancellationToken,
    ) -> Result<()> {
        let store = warehouse
            .table_builder(warehouse.root())?
            .build_storage()?
            .object_store(None);
        let watch = self.clone();
        let timeout = interval.max(Duration::from_secs(1));
        tokio::spawn(async move {
            loop {
                let probe = tokio::time::timeout(timeout, store.list_with_delimiter(None));
                let outcome = tokio::select! {
                    _ = stop.cancelled() => return,
                    r = probe => match r {
                        Ok(Ok(_)) => Ok(()),
                        Ok(Err(e)) => Err(format!("listing the warehouse root: {e}")),
                        Err(_) => Err(format!("listing the warehouse root took over {}ms", timeout.as_millis())),
                    },
                };
                watch.record(outcome);
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(interval) => {}
                }
            }
        });
        Ok(())
    }
}

/// How often to probe for a `threshold`: a quarter of it, between 100 ms and 15 s.
pub fn probe_interval(threshold: Duration) -> Duration {
    (threshold / 4).clamp(Duration::from_millis(100), Duration::from_secs(15))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_starts_the_clock_and_a_success_clears_it() {
        let watch = WarehouseWatch::default();
        assert!(watch.down_for().is_none());
        watch.record(Err("refused".into()));
        std::thread::sleep(Duration::from_millis(20));
        watch.record(Err("still refused".into()));
        let (down, error) = watch.down_for().expect("down");
        assert!(
            down >= Duration::from_millis(20),
            "the clock runs from the first failure"
        );
        assert_eq!(error, "still refused");
        watch.record(Ok(()));
        assert!(watch.down_for().is_none());
    }

    #[tokio::test]
    async fn a_local_warehouse_is_probed_reachable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let warehouse =
            Warehouse::parse(None, dir.path(), &crate::warehouse::S3Settings::default())
                .expect("warehouse");
        let watch = Arc::new(WarehouseWatch::default());
        watch.record(Err("before".into()));
        let stop = CancellationToken::new();
        watch
            .spawn(&warehouse, Duration::from_millis(100), stop.clone())
            .expect("spawn");
        let deadline = Instant::now() + Duration::from_secs(10);
        while watch.down_for().is_some() {
            assert!(Instant::now() < deadline, "the probe never succeeded");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stop.cancel();
    }
}
