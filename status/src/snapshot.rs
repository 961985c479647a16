//! What a pod's `/metrics` says, as the status page shows it: one [`PodSnapshot`] per pod
//! (state, streams, ingress, CPU, WAL, memtables, refusals) with a [`TableSnapshot`] per
//! table it serves, and a [`ClusterSnapshot`] of every pod the page covers, whose
//! [`ClusterSnapshot::tables`] merges each table across pods.
//!
//! Names of the metrics read are the constants below (the server exports them).

use crate::prom::Samples;

/// Record bytes received (counter).
pub const INGEST_BYTES: &str = "sluice_ingest_bytes_total";
/// Records received (counter).
pub const INGEST_RECORDS: &str = "sluice_ingest_records_total";
/// CPU seconds the pod process used since it started (user + system).
pub const CPU_SECONDS: &str = "sluice_process_cpu_seconds";
/// Streams open (gauge).
pub const STREAMS_OPEN: &str = "sluice_streams_open";
/// WAL bytes appended and not yet durable (gauge).
pub const WAL_QUEUED: &str = "sluice_wal_queued_bytes";
/// WAL fsync duration (summary).
pub const WAL_FSYNC: &str = "sluice_wal_fsync_seconds";
/// Free bytes on the WAL's disk (gauge).
pub const WAL_DISK_FREE: &str = "sluice_wal_disk_free_bytes";
/// Memtable bytes awaiting commit (gauge).
pub const MEMTABLE: &str = "sluice_memtable_bytes";
/// 1 while healthy (gauge).
pub const HEALTHY: &str = "sluice_healthy";
/// 1 while ready (gauge).
pub const READY: &str = "sluice_ready";
/// 1 while the pod drains its streams away (gauge).
pub const DRAINING: &str = "sluice_draining";
/// Streams ended or refused, by gRPC code (label `code`).
pub const REFUSALS: &str = "sluice_refusals_total";
/// Records received per table (counter).
pub const TABLE_RECORDS: &str = "sluice_table_records_total";
/// Rows committed per table (counter).
pub const TABLE_ROWS_COMMITTED: &str = "sluice_table_rows_committed_total";
/// Streams open per table (gauge).
pub const TABLE_STREAMS: &str = "sluice_table_streams_open";
/// Ack → visible in Delta, per table (summary).
pub const TABLE_FRESHNESS: &str = "sluice_table_freshness_seconds";
/// Age of the oldest row not yet committed, per table (gauge).
pub const TABLE_COMMIT_LAG: &str = "sluice_table_commit_lag_seconds";
/// Bytes waiting in the table's memtable (gauge).
pub const TABLE_PENDING: &str = "sluice_table_pending_bytes";
/// Unix time of the pod's last commit to the table (gauge).
pub const TABLE_LAST_COMMIT: &str = "sluice_table_last_commit_timestamp_seconds";
/// Live data files of the table (gauge, from the pod's last upkeep round).
pub const TABLE_FILES: &str = "sluice_table_files";
/// Bytes of the table's live data files (gauge).
pub const TABLE_SIZE: &str = "sluice_table_size_bytes";
/// Live files below half the target size: what compaction would rewrite (gauge).
pub const TABLE_SMALL_FILES: &str = "sluice_table_small_files";

/// Metrics labelled by `table` whose label values name the pod's tables.
const TABLE_METRICS: [&str; 9] = [
    TABLE_RECORDS,
    TABLE_ROWS_COMMITTED,
    TABLE_STREAMS,
    TABLE_FRESHNESS,
    TABLE_COMMIT_LAG,
    TABLE_PENDING,
    TABLE_LAST_COMMIT,
    TABLE_FILES,
    TABLE_SMALL_FILES,
];

/// One table as one pod (or the cluster) sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TableSnapshot {
    /// `catalog.schema.table`.
    pub name: String,
    /// Records received.
    pub records_total: f64,
    /// Rows committed.
    pub rows_committed_total: f64,
    /// Streams open.
    pub streams_open: f64,
    /// Freshness median, seconds (None before the first commit).
    pub freshness_p50: Option<f64>,
    /// Freshness 99th percentile, seconds.
    pub freshness_p99: Option<f64>,
    /// Age of the oldest uncommitted row, seconds.
    pub commit_lag_seconds: f64,
    /// Bytes awaiting commit.
    pub pending_bytes: f64,
    /// Unix time of the last commit.
    pub last_commit_unix: Option<f64>,
    /// Live data files.
    pub files: Option<f64>,
    /// Bytes of the live data files.
    pub size_bytes: Option<f64>,
    /// Files compaction would rewrite.
    pub small_files: Option<f64>,
}

impl TableSnapshot {
    /// Mean size of a live data file, bytes.
    pub fn mean_file_bytes(&self) -> Option<f64> {
        match (self.files, self.size_bytes) {
            (Some(f), Some(b)) if f > 0.0 => Some(b / f),
            _ => None,
        }
    }

    fn read(s: &Samples, name: &str) -> TableSnapshot {
        let t = [("table", name)];
        let q =
            |quantile: &str| s.value(TABLE_FRESHNESS, &[("table", name), ("quantile", quantile)]);
        TableSnapshot {
            name: name.to_string(),
            records_total: s.sum(TABLE_RECORDS, &t),
            rows_committed_total: s.sum(TABLE_ROWS_COMMITTED, &t),
            streams_open: s.sum(TABLE_STREAMS, &t),
            freshness_p50: q("0.5"),
            freshness_p99: q("0.99"),
            commit_lag_seconds: s.sum(TABLE_COMMIT_LAG, &t),
            pending_bytes: s.sum(TABLE_PENDING, &t),
            last_commit_unix: s.value(TABLE_LAST_COMMIT, &t),
            files: s.value(TABLE_FILES, &t),
            size_bytes: s.value(TABLE_SIZE, &t),
            small_files: s.value(TABLE_SMALL_FILES, &t),
        }
    }

    /// Folds the same table seen by another pod into this one: counts add up; latencies,
    /// lags and times take the worst (or latest); the Delta file figures, which every pod
    /// reads from the same table, take the most recent pod's (the largest file count).
    fn merge(&mut self, other: &TableSnapshot) {
        self.records_total += other.records_total;
        self.rows_committed_total += other.rows_committed_total;
        self.streams_open += other.streams_open;
        self.pending_bytes += other.pending_bytes;
        self.freshness_p50 = max_opt(self.freshness_p50, other.freshness_p50);
        self.freshness_p99 = max_opt(self.freshness_p99, other.freshness_p99);
        self.commit_lag_seconds = self.commit_lag_seconds.max(other.commit_lag_seconds);
        self.last_commit_unix = max_opt(self.last_commit_unix, other.last_commit_unix);
        if other.files.is_some()
            && (self.files.is_none() || other.last_commit_unix >= self.last_commit_unix)
        {
            self.files = other.files;
            self.size_bytes = other.size_bytes;
            self.small_files = other.small_files;
        }
    }
}

fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// One pod as its `/metrics` describes it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodSnapshot {
    /// Pod id.
    pub id: String,
    /// `ready`, `draining`, `not ready`; the router's page takes it from the meta store.
    pub state: String,
    /// Whether `/healthz` would answer 200.
    pub healthy: bool,
    /// Streams open.
    pub streams_open: f64,
    /// Record bytes received.
    pub ingress_bytes_total: f64,
    /// Records received.
    pub records_total: f64,
    /// CPU seconds used (None when the pod does not export it).
    pub cpu_seconds_total: Option<f64>,
    /// WAL bytes not yet durable.
    pub wal_queued_bytes: f64,
    /// WAL fsync p99, seconds.
    pub wal_fsync_p99: Option<f64>,
    /// Free bytes on the WAL's disk.
    pub wal_disk_free_bytes: Option<f64>,
    /// Memtable bytes.
    pub memtable_bytes: f64,
    /// Tables the pod has metrics for, by name.
    pub tables: Vec<TableSnapshot>,
    /// Refusals by gRPC code, by code name.
    pub refusals: Vec<(String, f64)>,
}

impl PodSnapshot {
    /// The snapshot `samples` (one pod's `/metrics`) describe.
    pub fn from_samples(id: &str, s: &Samples) -> PodSnapshot {
        let mut names: Vec<String> = Vec::new();
        for metric in TABLE_METRICS {
            for t in s.label_values(metric, "table") {
                if !names.contains(&t) {
                    names.push(t);
                }
            }
        }
        names.sort();
        let mut refusals: Vec<(String, f64)> = s
            .label_values(REFUSALS, "code")
            .into_iter()
            .map(|code| {
                let n = s.sum(REFUSALS, &[("code", &code)]);
                (code, n)
            })
            .collect();
        refusals.sort_by(|a, b| a.0.cmp(&b.0));
        let ready = s.value(READY, &[]).is_some_and(|v| v > 0.0);
        let state = if s.value(DRAINING, &[]).is_some_and(|v| v > 0.0) {
            "draining"
        } else if ready {
            "ready"
        } else {
            "not ready"
        };
        PodSnapshot {
            id: id.to_string(),
            state: state.to_string(),
            healthy: s.value(HEALTHY, &[]).is_some_and(|v| v > 0.0),
            streams_open: s.sum(STREAMS_OPEN, &[]),
            ingress_bytes_total: s.sum(INGEST_BYTES, &[]),
            records_total: s.sum(INGEST_RECORDS, &[]),
            cpu_seconds_total: s.value(CPU_SECONDS, &[]),
            wal_queued_bytes: s.sum(WAL_QUEUED, &[]),
            wal_fsync_p99: s.value(WAL_FSYNC, &[("quantile", "0.99")]),
            wal_disk_free_bytes: s.value(WAL_DISK_FREE, &[]),
            memtable_bytes: s.sum(MEMTABLE, &[]),
            tables: names.iter().map(|n| TableSnapshot::read(s, n)).collect(),
            refusals,
        }
    }
}

/// A pod the page covers: its snapshot, or why it could not be read.
#[derive(Clone, Debug, PartialEq)]
pub enum PodView {
    /// Read.
    Seen(PodSnapshot),
    /// Not read (unreachable, or its metrics did not parse): pod id and the reason.
    Unreachable {
        /// Pod id.
        id: String,
        /// State from the meta store.
        state: String,
        /// What went wrong.
        reason: String,
    },
}

/// Every pod one page covers (one for a pod's own page).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterSnapshot {
    /// The pods, in the order given.
    pub pods: Vec<PodView>,
}

/// The class a gRPC code's refusal falls into on the page.
pub fn status_class(code: &str) -> &'static str {
    match code {
        "InvalidArgument" | "NotFound" | "AlreadyExists" | "PermissionDenied"
        | "Unauthenticated" | "FailedPrecondition" | "OutOfRange" => "client",
        "ResourceExhausted" | "Unavailable" | "Aborted" | "DeadlineExceeded" | "Cancelled" => {
            "overload or retry"
        }
        _ => "server",
    }
}

impl ClusterSnapshot {
    /// The pods that were read.
    pub fn seen(&self) -> impl Iterator<Item = &PodSnapshot> {
        self.pods.iter().filter_map(|p| match p {
            PodView::Seen(s) => Some(s),
            PodView::Unreachable { .. } => None,
        })
    }

    /// Every table across the pods read, merged by name, sorted by name.
    pub fn tables(&self) -> Vec<TableSnapshot> {
        let mut out: Vec<TableSnapshot> = Vec::new();
        for pod in self.seen() {
            for t in &pod.tables {
                match out.iter_mut().find(|x| x.name == t.name) {
                    Some(x) => x.merge(t),
                    None => out.push(t.clone()),
                }
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Refusals summed over pods, by code, sorted by code.
    pub fn refusals(&self) -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = Vec::new();
        for pod in self.seen() {
            for (code, n) in &pod.refusals {
                match out.iter_mut().find(|(c, _)| c == code) {
                    Some((_, x)) => *x += n,
                    None => out.push((code.clone(), *n)),
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// A sum over the pods read.
    pub fn total(&self, f: impl Fn(&PodSnapshot) -> f64) -> f64 {
        self.seen().map(f).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(id: &str, text: &str) -> PodSnapshot {
        PodSnapshot::from_samples(id, &Samples::parse(text).expect("parse"))
    }

    const A: &str = r#"
sluice_ready 1
sluice_healthy 1
sluice_streams_open 2
sluice_ingest_bytes_total 5390
sluice_ingest_records_total 500
sluice_process_cpu_seconds 1.5
sluice_wal_fsync_seconds{quantile="0.99"} 0.002
sluice_memtable_bytes 100
sluice_refusals_total{code="NotFound"} 1
sluice_table_records_total{table="main.s.t"} 500
sluice_table_rows_committed_total{table="main.s.t"} 400
sluice_table_streams_open{table="main.s.t"} 2
sluice_table_freshness_seconds{table="main.s.t",quantile="0.5"} 0.2
sluice_table_freshness_seconds{table="main.s.t",quantile="0.99"} 0.4
sluice_table_commit_lag_seconds{table="main.s.t"} 0.1
sluice_table_last_commit_timestamp_seconds{table="main.s.t"} 1000
sluice_table_files{table="main.s.t"} 4
sluice_table_size_bytes{table="main.s.t"} 4000
sluice_table_small_files{table="main.s.t"} 4
sluice_table_pending_bytes{table="main.z"} 0
"#;

    #[test]
    fn a_pods_metrics_become_its_snapshot() {
        let p = pod("p1", A);
        assert_eq!(p.state, "ready");
        assert!(p.healthy);
        assert_eq!(p.streams_open, 2.0);
        assert_eq!(p.records_total, 500.0);
        assert_eq!(p.cpu_seconds_total, Some(1.5));
        assert_eq!(p.wal_fsync_p99, Some(0.002));
        assert_eq!(p.refusals, vec![("NotFound".to_string(), 1.0)]);
        let names: Vec<&str> = p.tables.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["main.s.t", "main.z"]);
        let t = &p.tables[0];
        assert_eq!(
            (t.records_total, t.rows_committed_total, t.streams_open),
            (500.0, 400.0, 2.0)
        );
        assert_eq!((t.freshness_p50, t.freshness_p99), (Some(0.2), Some(0.4)));
        assert_eq!(t.mean_file_bytes(), Some(1000.0));
        assert_eq!(p.tables[1].freshness_p99, None);
        assert_eq!(p.tables[1].mean_file_bytes(), None);
        assert_eq!(pod("p0", "sluice_ready 0\n").state, "not ready");
        assert_eq!(
            pod("p0", "sluice_ready 1\nsluice_draining 1\n").state,
            "draining"
        );
    }

    #[test]
    fn the_cluster_adds_counts_and_keeps_the_worst_latency() {
        let b = A
            .replace("0.99\"} 0.4", "0.99\"} 0.9")
            .replace(
                "timestamp_seconds{table=\"main.s.t\"} 1000",
                "timestamp_seconds{table=\"main.s.t\"} 2000",
            )
            .replace(
                "sluice_table_files{table=\"main.s.t\"} 4",
                "sluice_table_files{table=\"main.s.t\"} 5",
            );
        let c = ClusterSnapshot {
            pods: vec![
                PodView::Seen(pod("a", A)),
                PodView::Seen(pod("b", &b)),
                PodView::Unreachable {
                    id: "c".into(),
                    state: "ready".into(),
                    reason: "refused".into(),
                },
            ],
        };
        let t = &c.tables()[0];
        assert_eq!(t.records_total, 1000.0);
        assert_eq!(t.streams_open, 4.0);
        assert_eq!(t.freshness_p99, Some(0.9));
        assert_eq!(t.last_commit_unix, Some(2000.0));
        assert_eq!(t.files, Some(5.0));
        assert_eq!(c.refusals(), vec![("NotFound".to_string(), 2.0)]);
        assert_eq!(c.total(|p| p.streams_open), 4.0);
        assert_eq!(status_class("NotFound"), "client");
        assert_eq!(status_class("ResourceExhausted"), "overload or retry");
        assert_eq!(status_class("Internal"), "server");
    }
}
