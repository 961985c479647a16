//! Whether the pod can keep its promises, as `/healthz` answers it: the WAL has not
//! failed (a failed WAL never acks again from this process) and the warehouse has not
//! been unreachable for longer than `--warehouse-unhealthy-after` ([`warehouse_watch`]).
//! A full WAL disk is a stall, not a failure: the pod stays healthy and resumes when
//! space returns.

pub mod disk;
pub mod warehouse_watch;

use std::time::Duration;

use serde::Serialize;

pub use warehouse_watch::WarehouseWatch;

/// One reason the pod is not healthy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Reason {
    /// Which check failed: `wal` or `warehouse`.
    pub check: &'static str,
    /// What is wrong, in words.
    pub message: String,
}

/// The answer of `/healthz`: healthy when `reasons` is empty.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HealthReport {
    /// `ok` or `unhealthy`.
    pub status: &'static str,
    /// Why not healthy (empty when healthy).
    pub reasons: Vec<Reason>,
}

impl HealthReport {
    /// Whether every check passed.
    pub fn healthy(&self) -> bool {
        self.reasons.is_empty()
    }
}

/// What the checks read: the WAL's failure text and how long the warehouse has been
/// unreachable (with the last error).
pub struct HealthInputs<'a> {
    /// Set once the WAL can no longer make data durable.
    pub wal_failed: Option<&'a str>,
    /// How long the warehouse has failed every probe, and the last error.
    pub warehouse_down: Option<(Duration, String)>,
    /// Unreachable for longer than this makes the pod unhealthy.
    pub warehouse_threshold: Duration,
}

/// Judges `inputs`; also sets the `sluice_healthy` gauge (1 healthy, 0 not).
pub fn assess(inputs: HealthInputs<'_>) -> HealthReport {
    let mut reasons = Vec::new();
    if let Some(why) = inputs.wal_failed {
        reasons.push(Reason {
            check: "wal",
            message: format!(
                "the write-ahead log can no longer make data durable (restart the pod): {why}"
            ),
        });
    }
    if let Some((down, error)) = inputs.warehouse_down {
        if down > inputs.warehouse_threshold {
            reasons.push(Reason {
                check: "warehouse",
                message: format!(
                    "the warehouse has been unreachable for {}s (threshold {}s): {error}",
                    down.as_secs(),
                    inputs.warehouse_threshold.as_secs_f64()
                ),
            });
        }
    }
    let healthy = reasons.is_empty();
    metrics::gauge!("sluice_healthy").set(if healthy { 1.0 } else { 0.0 });
    HealthReport {
        status: if healthy { "ok" } else { "unhealthy" },
        reasons,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(wal: Option<&str>, down: Option<u64>) -> HealthInputs<'_> {
        HealthInputs {
            wal_failed: wal,
            warehouse_down: down.map(|s| (Duration::from_secs(s), "connection refused".into())),
            warehouse_threshold: Duration::from_secs(30),
        }
    }

    #[test]
    fn healthy_when_nothing_failed_or_the_warehouse_is_down_briefly() {
        assert!(assess(inputs(None, None)).healthy());
        let brief = assess(inputs(None, Some(30)));
        assert!(brief.healthy(), "{brief:?}");
        assert_eq!(brief.status, "ok");
    }

    #[test]
    fn a_failed_wal_or_a_long_warehouse_outage_is_unhealthy_with_the_reason() {
        let wal = assess(inputs(Some("Input/output error"), None));
        assert_eq!(wal.status, "unhealthy");
        assert_eq!(wal.reasons.len(), 1);
        assert_eq!(wal.reasons[0].check, "wal");
        assert!(wal.reasons[0].message.contains("Input/output error"));

        let both = assess(inputs(Some("EIO"), Some(31)));
        let checks: Vec<_> = both.reasons.iter().map(|r| r.check).collect();
        assert_eq!(checks, ["wal", "warehouse"]);
        assert!(both.reasons[1].message.contains("connection refused"));
        assert!(both.reasons[1].message.contains("31s"));
    }
}
