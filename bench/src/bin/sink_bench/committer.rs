//! Many lightweight pods on one table (issue 20, "Scale without 100
//! machines"): N simulated pods — tokio tasks, each with its own WAL id and
//! advancing LSN range but no WAL — write a small real Parquet file every
//! flush interval and either hand it off to the table's ONE committer
//! (`sluice_server::commit::Committer`, unfenced) and wait for its answer
//! before the next flush, as a pod does, or commit it themselves through the
//! sink's `commit_append` on their own table handle (today's per-pod model).
//!
//! Per run: table commits (versions added), rows answered, commit lag
//! (committer: hand-off sent → answered; per-pod: write start → commit
//! landed), files per commit, failed hand-offs/commits and this process's
//! CPU per commit. Every run ends with a check that the table holds exactly
//! the rows answered (Add `numRecords` read back with deltalake).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use deltalake::DeltaTable;
use sluice_bench::stats::Samples;
use sluice_server::commit::{Committer, CommitterConfig, Fencing, HandOff};
use sluice_server::sink::{commit_append, write_files, AppendCommit};
use sluice_server::warehouse::Warehouse;

use crate::commits::{create_table, id_batch};

/// Who commits the pods' files.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// One committer per table; pods hand their files off to it.
    Committer,
    /// Every pod commits its own appends (today's model).
    PerPod,
}

impl Model {
    /// The label in the report.
    pub fn label(self) -> &'static str {
        match self {
            Model::Committer => "committer",
            Model::PerPod => "per-pod",
        }
    }
}

/// The shape of one run.
#[derive(Clone, Copy)]
pub struct Shape {
    /// Simulated pods.
    pub pods: usize,
    /// Pods stop starting flushes after this long.
    pub seconds: u64,
    /// The committer's `--commit-interval`.
    pub commit_interval: Duration,
    /// Each pod writes one file per flush interval.
    pub flush_interval: Duration,
    /// Rows in each pod's file.
    pub rows_per_flush: usize,
    /// Lost races a per-pod commit may retry.
    pub retries: usize,
}

/// What one run measured.
pub struct Run {
    /// Table versions added during the run.
    pub commits: u64,
    /// Files the table holds at the end.
    pub files: u64,
    /// Rows whose hand-off (or commit) was answered with success.
    pub rows: u64,
    /// Rows the table holds at the end.
    pub table_rows: u64,
    /// Failed hand-offs (each resent) or failed per-pod commits.
    pub failed: u64,
    /// Commit lag of each answered hand-off / landed commit, ms.
    pub lag: Samples,
    /// Wall seconds until every pod had its last answer.
    pub seconds: f64,
    /// CPU seconds of this process during the run.
    pub cpu_s: f64,
    /// Each distinct error with its count.
    pub errors: BTreeMap<String, u64>,
}

/// What one simulated pod counted.
#[derive(Default)]
struct PodTally {
    rows: u64,
    failed: u64,
    lag: Samples,
    errors: BTreeMap<String, u64>,
}

impl PodTally {
    fn fail(&mut self, e: impl ToString) {
        self.failed += 1;
        *self.errors.entry(e.to_string()).or_default() += 1;
    }
}

/// Parses an interval flag: a whole number of `ms` or `s` (`250ms`, `1s`).
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let number = |n: &str| {
        n.parse::<u64>()
            .map_err(|e| format!("{s}: {e} (want e.g. 250ms or 1s)"))
    };
    match s.strip_suffix("ms") {
        Some(ms) => number(ms).map(Duration::from_millis),
        None => match s.strip_suffix('s') {
            Some(secs) => number(secs).map(Duration::from_secs),
            None => Err(format!("{s}: want e.g. 250ms or 1s")),
        },
    }
}

/// Hand-offs a pod resends after failures before it gives up.
const RESENDS: usize = 10;

/// Runs `shape.pods` pods of `model` on a new table `name`.
pub async fn run(warehouse: &Warehouse, name: &str, model: Model, shape: Shape) -> Result<Run> {
    let url = create_table(warehouse, name).await?;
    let committer = match model {
        Model::Committer => Some(Arc::new(Committer::spawn(
            name.to_string(),
            warehouse.open(&url).await?,
            CommitterConfig {
                interval: shape.commit_interval,
                ..CommitterConfig::default()
            },
            Fencing::Unfenced,
        ))),
        Model::PerPod => None,
    };
    let started = Instant::now();
    let cpu_before = crate::throughput::cpu_seconds();
    let deadline = started + Duration::from_secs(shape.seconds);
    let mut tasks = Vec::new();
    for p in 0..shape.pods {
        let table = warehouse.open(&url).await?;
        let committer = committer.clone();
        let name = name.to_string();
        tasks.push(tokio::spawn(async move {
            match committer {
                Some(c) => handing_pod(&c, &name, table, p, shape, deadline).await,
                None => committing_pod(table, p, shape, deadline).await,
            }
        }));
    }
    let mut r = Run {
        commits: 0,
        files: 0,
        rows: 0,
        table_rows: 0,
        failed: 0,
        lag: Samples::new(),
        seconds: 0.0,
        cpu_s: 0.0,
        errors: BTreeMap::new(),
    };
    for t in tasks {
        let tally = t.await??;
        r.rows += tally.rows;
        r.failed += tally.failed;
        r.lag.extend(&tally.lag);
        for (e, n) in tally.errors {
            *r.errors.entry(e).or_default() += n;
        }
    }
    r.seconds = started.elapsed().as_secs_f64();
    r.cpu_s = crate::throughput::cpu_seconds() - cpu_before;
    drop(committer);
    let table = warehouse.open(&url).await?;
    r.commits = table.version().unwrap_or(0);
    let files = crate::compaction::files(warehouse, &url).await?;
    r.files = files.count as u64;
    r.table_rows = files.rows as u64;
    Ok(r)
}

/// The first id of pod `p`'s rows: pods never share an id.
fn first_id(p: usize) -> i64 {
    p as i64 * 1_000_000_000_000
}

/// Waits out the rest of the flush interval that began at `tick`.
async fn pace(tick: Instant, shape: &Shape) {
    tokio::time::sleep_until((tick + shape.flush_interval).into()).await;
}

/// A pod of the committer model: writes a file, hands it off and waits for
/// the answer (resending the same hand-off after a failure, as a pod does),
/// once per flush interval.
async fn handing_pod(
    committer: &Committer,
    table_name: &str,
    table: DeltaTable,
    p: usize,
    shape: Shape,
    deadline: Instant,
) -> Result<PodTally> {
    let mut tally = PodTally::default();
    let mut next = first_id(p);
    let mut lsn = 0u64;
    while Instant::now() < deadline {
        let tick = Instant::now();
        let adds = write_files(&table, [Ok(id_batch(next, shape.rows_per_flush)?)]).await?;
        let handoff = HandOff {
            table: table_name.to_string(),
            pod_id: format!("sim-pod-{p}"),
            wal_id: format!("sim-wal-{p}"),
            from_lsn: lsn,
            to_lsn: lsn + shape.rows_per_flush as u64,
            adds,
            streams: Vec::new(),
            schema_id: String::new(),
        };
        let mut answered = false;
        for _ in 0..RESENDS {
            let sent = Instant::now();
            match committer.hand_off(handoff.clone()).await {
                Ok(_) => {
                    tally.lag.push_ms(sent.elapsed());
                    answered = true;
                    break;
                }
                Err(e) => tally.fail(e),
            }
        }
        if !answered {
            // The next range would be a gap: this pod is done.
            break;
        }
        tally.rows += shape.rows_per_flush as u64;
        next += shape.rows_per_flush as i64;
        lsn = handoff.to_lsn;
        pace(tick, &shape).await;
    }
    Ok(tally)
}

/// A pod of today's model: writes and commits its own append, once per
/// flush interval.
async fn committing_pod(
    mut table: DeltaTable,
    p: usize,
    shape: Shape,
    deadline: Instant,
) -> Result<PodTally> {
    let mut tally = PodTally::default();
    let mut next = first_id(p);
    let app_id = format!("sim-wal-{p}");
    let mut lsn = 0i64;
    while Instant::now() < deadline {
        let tick = Instant::now();
        lsn += shape.rows_per_flush as i64;
        let commit = AppendCommit {
            app_id: &app_id,
            txn_version: lsn,
            max_retries: shape.retries,
            streams: &[],
        };
        match commit_append(&mut table, id_batch(next, shape.rows_per_flush)?, commit).await {
            Ok(_) => {
                tally.lag.push_ms(tick.elapsed());
                tally.rows += shape.rows_per_flush as u64;
            }
            Err(e) => {
                tally.fail(e);
                table.update_incremental(None).await?;
            }
        }
        next += shape.rows_per_flush as i64;
        pace(tick, &shape).await;
    }
    Ok(tally)
}
