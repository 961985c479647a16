//! Helpers of the per-table committer tests (`committer_cluster.rs`, `committer_raw.rs`):
//! a cluster of `sluice serve --join` pods on one local warehouse, the Delta log read
//! commit by commit (adds, txns, time), the elected committer read from etcd, and
//! SIGSTOP / SIGCONT of a pod.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sluice_router::Meta;

use crate::harness::Server;

/// The `txn` app id committers record their epoch under.
pub const COMMITTER_APP_ID: &str = "sluice-committer";

/// Starts pod `id` joined to `join`, flushing every 250 ms into `warehouse`.
pub async fn start_pod(root: &Path, id: &str, join: &str, warehouse: &Path) -> Server {
    start_pod_with(root, id, join, warehouse, "250ms", &[]).await
}

/// [`start_pod`] flushing every `flush` with `extra` flags.
pub async fn start_pod_with(
    root: &Path,
    id: &str,
    join: &str,
    warehouse: &Path,
    flush: &str,
    extra: &[&str],
) -> Server {
    let mut args = vec!["--drain-grace", "3s"];
    args.extend_from_slice(extra);
    crate::cluster_harness::start_joined(root, id, join, warehouse, flush, &args).await
}

/// One commit of the Delta log.
#[derive(Debug, Clone)]
pub struct LogCommit {
    /// Table version.
    pub version: u64,
    /// commitInfo timestamp (ms since the epoch).
    pub timestamp: i64,
    /// Files added with new data (`dataChange`; compaction's adds are not).
    pub adds: usize,
    /// `txn` actions: app id → version.
    pub txns: HashMap<String, i64>,
    /// The `stats` of each Add action.
    pub stats: Vec<String>,
}

impl LogCommit {
    /// The committer epoch this commit carries, if any.
    pub fn epoch(&self) -> Option<i64> {
        self.txns.get(COMMITTER_APP_ID).copied()
    }
}

/// The local folder of a `file://` table location.
pub fn table_dir(location: &str) -> PathBuf {
    url::Url::parse(location)
        .expect("location url")
        .to_file_path()
        .expect("a local table")
}

/// Every JSON commit of the table's log, in version order.
pub fn log_commits(location: &str) -> Vec<LogCommit> {
    let log = table_dir(location).join("_delta_log");
    let mut commits = Vec::new();
    for entry in std::fs::read_dir(&log).expect("read _delta_log") {
        let path = entry.expect("entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let Some(version) = name
            .strip_suffix(".json")
            .and_then(|v| v.parse::<u64>().ok())
        else {
            continue;
        };
        let text = std::fs::read_to_string(&path).expect("read commit");
        let mut commit = LogCommit {
            version,
            timestamp: 0,
            adds: 0,
            txns: HashMap::new(),
            stats: Vec::new(),
        };
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let action: serde_json::Value = serde_json::from_str(line).expect("action json");
            if let Some(add) = action.get("add") {
                commit.adds += usize::from(add["dataChange"].as_bool().unwrap_or(true));
                commit
                    .stats
                    .push(add["stats"].as_str().unwrap_or_default().to_string());
            }
            if let Some(txn) = action.get("txn") {
                let app = txn["appId"].as_str().expect("appId").to_string();
                commit
                    .txns
                    .insert(app, txn["version"].as_i64().expect("txn version"));
            }
            if let Some(info) = action.get("commitInfo") {
                commit.timestamp = info["timestamp"].as_i64().unwrap_or(0);
            }
        }
        commits.push(commit);
    }
    commits.sort_by_key(|c| c.version);
    commits
}

/// Milliseconds since the epoch now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

/// The elected committer of `table` in etcd: (pod id, address, epoch = create revision).
pub async fn committer_of(join: &str, table: &str) -> Option<(String, String, u64)> {
    let meta = Meta::connect(join, &Default::default())
        .await
        .expect("meta store");
    let key = format!("/sluice/committers/{}", table.to_ascii_lowercase());
    let resp = meta.client().get(key.as_str()).await.expect("etcd get");
    let kv = resp.kvs.into_iter().next()?;
    let value: serde_json::Value = serde_json::from_slice(&kv.value).expect("holder json");
    Some((
        value["pod"].as_str().expect("pod").to_string(),
        value["addr"].as_str().expect("addr").to_string(),
        kv.create_revision as u64,
    ))
}

/// Waits until `table` has an elected committer that `pred` accepts.
pub async fn wait_for_committer(
    join: &str,
    table: &str,
    timeout: Duration,
    pred: impl Fn(&(String, String, u64)) -> bool,
) -> (String, String, u64) {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(holder) = committer_of(join, table).await {
            if pred(&holder) {
                return holder;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no committer of {table} as expected within {timeout:?} (now {:?})",
            committer_of(join, table).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sends `signal` (SIGSTOP, SIGCONT) to a running pod.
pub fn signal(pod: &Server, signal: i32) {
    let pid = pod.pid().expect("a running pod");
    // SAFETY: kill(2) on our own child's pid; no memory is touched.
    let rc = unsafe { libc::kill(pid as i32, signal) };
    assert_eq!(rc, 0, "kill({pid}, {signal})");
}
