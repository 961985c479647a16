//! The process-wide Prometheus recorder behind `/metrics`.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Failure counters the dashboard and alerts read, exported as 0 from the start (a
/// counter otherwise appears only at its first increment, leaving a panel empty).
const ZERO_FROM_START: [&str; 1] = ["sluice_sink_commit_failures_total"];

/// Installs the recorder once per process (later calls are no-ops).
pub fn install() {
    HANDLE.get_or_init(|| match PrometheusBuilder::new().install_recorder() {
        Ok(h) => {
            for name in ZERO_FROM_START {
                metrics::counter!(name).increment(0);
            }
            Some(h)
        }
        Err(e) => {
            tracing::warn!("metrics recorder not installed: {e}");
            None
        }
    });
}

/// The current metrics in Prometheus text format.
pub fn render() -> String {
    HANDLE
        .get()
        .and_then(|h| h.as_ref())
        .map(|h| h.render())
        .unwrap_or_default()
}
