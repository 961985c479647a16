//! The process-wide Prometheus recorder behind `/metrics`.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the recorder once per process (later calls are no-ops).
pub fn install() {
    HANDLE.get_or_init(|| match PrometheusBuilder::new().install_recorder() {
        Ok(h) => Some(h),
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
