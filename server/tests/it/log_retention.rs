//! Log retention end to end, on the local warehouse and on S3 (moto): a table
//! with `delta.checkpointInterval=5` and `delta.logRetentionDuration=interval 1
//! seconds` gets many small commits from the official Rust SDK (20 ms flush
//! and commit intervals); the background upkeep (300 ms rounds) writes checkpoints and
//! deletes expired log files by itself — also after ingest stopped, when no
//! new checkpoint is written. Afterwards no JSON commit before the newest
//! checkpoint is left, `_last_checkpoint` exists, and Python `deltalake` and
//! `polars` read every row exactly once from what remains.

use std::time::{Duration, Instant};

use crate::harness::Server;
use crate::id_v;
use crate::moto::{python_read, Moto, BUCKET};

/// Records pushed.
const N: i64 = 3_000;
/// Records per request.
const BATCH: i64 = 20;
/// The table's `delta.checkpointInterval`.
const CHECKPOINT_INTERVAL: u64 = 5;

/// What a `_delta_log` listing holds: the versions of its JSON commits, the
/// newest checkpoint version and whether `_last_checkpoint` is there.
#[derive(Debug)]
pub struct LogListing {
    pub commits: Vec<u64>,
    pub checkpoint: Option<u64>,
    pub last_checkpoint_file: bool,
}

impl LogListing {
    /// From the object keys (or file names) of a `_delta_log` folder.
    pub fn new(keys: &[String]) -> LogListing {
        let name = |k: &String| k.rsplit('/').next().unwrap_or_default().to_string();
        let version = |n: &str, suffix: &str| n.strip_suffix(suffix)?.parse::<u64>().ok();
        let names: Vec<String> = keys.iter().map(name).collect();
        LogListing {
            commits: names.iter().filter_map(|n| version(n, ".json")).collect(),
            checkpoint: names
                .iter()
                .filter_map(|n| version(n, ".checkpoint.parquet"))
                .max(),
            last_checkpoint_file: names.iter().any(|n| n == "_last_checkpoint"),
        }
    }

    /// JSON commits before the newest checkpoint (the checkpoint's own
    /// version keeps its JSON commit, as deltalake's cleanup leaves it).
    fn before_checkpoint(&self) -> Vec<u64> {
        let cp = self.checkpoint.unwrap_or(0);
        self.commits.iter().copied().filter(|v| *v < cp).collect()
    }

    /// Whether the newest checkpoint is the last one due (fewer than
    /// `interval` commits after it).
    fn checkpoint_is_current(&self, interval: u64) -> bool {
        let newest = self.commits.iter().copied().max().unwrap_or(0);
        self.checkpoint.is_some_and(|cp| newest < cp + interval)
    }
}

/// Where the table lives, and how to list its log.
enum Store<'a> {
    Local,
    S3(&'a Moto),
}

impl Store<'_> {
    async fn log(&self, location: &str) -> LogListing {
        let keys = match self {
            Store::Local => {
                let dir = url::Url::parse(location)
                    .expect("location URL")
                    .to_file_path()
                    .expect("local table")
                    .join("_delta_log");
                std::fs::read_dir(&dir)
                    .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
                    .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                    .collect()
            }
            Store::S3(moto) => {
                let prefix = location
                    .strip_prefix(&format!("s3://{BUCKET}/"))
                    .expect("on the test bucket");
                moto.list(&format!("{prefix}_delta_log/")).await
            }
        };
        LogListing::new(&keys)
    }

    fn reader_options(&self) -> serde_json::Value {
        match self {
            Store::Local => serde_json::json!({}),
            Store::S3(moto) => moto.storage_options(),
        }
    }
}

async fn upkeep_expires_old_log_commits_and_every_row_reads_once(store: Store<'_>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut args: Vec<String> = match &store {
        Store::Local => Vec::new(),
        Store::S3(moto) => moto.serve_args("retention"),
    };
    // Many small commits: the committer may commit as often as the pod flushes.
    args.extend(["--upkeep-interval", "300ms", "--commit-interval", "20ms"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut server = Server::start_with_args(dir.path(), "20ms", &args).await;
    let table = "main.upkeep.retention";
    let location = server
        .create_table_with(
            table,
            id_v::COLUMNS,
            &[
                "--property",
                &format!("delta.checkpointInterval={CHECKPOINT_INTERVAL}"),
                "--property",
                "delta.logRetentionDuration=interval 1 seconds",
            ],
        )
        .await;
    let stream = server.json_stream(table).await;
    id_v::push(stream, N, BATCH, Duration::from_millis(30)).await;

    // Upkeep writes the last checkpoint due and deletes what it covers once
    // that is older than 1 s, with no help: no commit arrives any more.
    let done = |log: &LogListing| {
        log.last_checkpoint_file
            && log.checkpoint_is_current(CHECKPOINT_INTERVAL)
            && log.before_checkpoint().is_empty()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut log = store.log(&location).await;
    while !done(&log) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(300)).await;
        log = store.log(&location).await;
    }
    server.terminate();
    eprintln!("_delta_log after upkeep: {log:?}");
    let checkpoint = log.checkpoint.expect("a checkpoint was written");
    assert!(
        checkpoint >= 10,
        "only {checkpoint} commits before the last checkpoint: {log:?}"
    );
    assert!(log.last_checkpoint_file, "no _last_checkpoint: {log:?}");
    assert!(
        log.checkpoint_is_current(CHECKPOINT_INTERVAL),
        "a checkpoint is due but was not written: {log:?}"
    );
    assert_eq!(
        log.before_checkpoint(),
        Vec::<u64>::new(),
        "JSON commits before checkpoint {checkpoint} were kept"
    );

    id_v::assert_read_once(&python_read(&location, &store.reader_options()), N);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_short_log_retention_on_a_local_table_when_upkeep_runs_then_covered_commits_are_gone_and_rows_read_once(
) {
    upkeep_expires_old_log_commits_and_every_row_reads_once(Store::Local).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_short_log_retention_on_s3_when_upkeep_runs_then_covered_commits_are_gone_and_rows_read_once(
) {
    let moto = Moto::start().await;
    upkeep_expires_old_log_commits_and_every_row_reads_once(Store::S3(&moto)).await;
}
