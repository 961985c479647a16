//! The per-table committer: collects the table's pending hand-offs and
//! commits all of them in one Delta commit, at most once per
//! `interval` (a hand-off arriving after a quiet interval is committed at
//! once), answering each hand-off only after the commit that holds it — or
//! at once when the log already covers it.
//!
//! One task per table, started by [`Committer::spawn`] on the Delta runtime
//! (`crate::delta_runtime`: its log reads and writes do not queue behind the
//! streams' tasks) with its own table handle; it ends when the [`Committer`] is
//! dropped. Before every commit attempt the task reloads the log, refuses to go
//! on if a newer epoch claimed the table (fenced mode), answers covered
//! hand-offs, refuses gaps and overlaps, and commits the rest with one `txn`
//! per pod WAL (version = the highest `to_lsn`), one per persistent stream
//! (version = its highest offset) and, fenced, the epoch `txn`. Before its
//! first commit attempt a hand-off's files are checked to be in the store
//! (HEAD); a missing file refuses that hand-off only. A lost race reloads and
//! judges again; any other failure answers [`HandOffError::Commit`] (the commit
//! may have landed: the pod resends the same hand-off and finds it covered).
//!
//! Pending hand-offs are bounded in count and bytes; above the bound a
//! hand-off is refused at once with [`HandOffError::Busy`]. The same
//! hand-off sent again while it is still queued waits for the one answer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use deltalake::kernel::Transaction;
use deltalake::DeltaTable;
use tokio::sync::{oneshot, Notify};
use tokio_util::sync::CancellationToken;

use super::attempt::{commit_once, lost_race, reload};
use super::covered::{judge, txn_version, wal_marks, Verdict};
use super::fence::{log_epoch, Fencing};
use super::handoff::{HandOff, HandOffAck, HandOffError};
use super::present::check_files;

/// Lost races a batch of hand-offs is retried after (each on a reloaded log).
const COMMIT_ATTEMPTS: usize = 100;

/// How a committer batches and bounds hand-offs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitterConfig {
    /// At most one commit per interval (`--commit-interval`). Default: 250 ms.
    pub interval: Duration,
    /// Hand-offs pending (queued or being committed) before new ones are
    /// refused as busy. Default: 1024.
    pub max_pending: usize,
    /// Parquet bytes pending before new hand-offs are refused as busy.
    /// Default: 4 GiB.
    pub max_pending_bytes: u64,
}

impl Default for CommitterConfig {
    fn default() -> Self {
        CommitterConfig {
            interval: Duration::from_millis(250),
            max_pending: 1024,
            max_pending_bytes: 4 << 30,
        }
    }
}

type Answer = Result<HandOffAck, HandOffError>;

struct Entry {
    handoff: HandOff,
    waiters: Vec<oneshot::Sender<Answer>>,
    since: Instant,
    /// Its files were found in the store (HEAD check done).
    present: bool,
}

#[derive(Default)]
struct Queue {
    queued: Vec<Entry>,
    /// Hand-offs and bytes queued or being committed.
    count: usize,
    bytes: u64,
    /// Set once a newer epoch claimed the table.
    deposed: Option<HandOffError>,
    stopped: bool,
}

struct Shared {
    table: String,
    config: CommitterConfig,
    fencing: Fencing,
    queue: Mutex<Queue>,
    wake: Notify,
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        // A panic while holding the lock leaves counters only; keep going.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn gauges(&self, q: &Queue) {
        let table = self.table.clone();
        metrics::gauge!("sluice_committer_pending_handoffs", "table" => table.clone())
            .set(q.count as f64);
        metrics::gauge!("sluice_committer_pending_bytes", "table" => table).set(q.bytes as f64);
    }

    /// Sends `answer` to every entry of `batch`.
    fn answer_all(&self, batch: Vec<Entry>, answer: Answer) {
        for entry in batch {
            self.answer(entry, &answer);
        }
    }

    /// Sends `answer` to the waiters of `entry` and releases its room.
    fn answer(&self, entry: Entry, answer: &Answer) {
        {
            let mut q = self.queue();
            q.count = q.count.saturating_sub(1);
            q.bytes = q.bytes.saturating_sub(entry.handoff.bytes());
            self.gauges(&q);
        }
        for w in entry.waiters {
            let _ = w.send(answer.clone());
        }
    }
}

/// Handle to the committer task of one table; dropping it stops the task.
pub struct Committer {
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Committer {
    /// Starts the committer of `table` (named `name`) on its own table
    /// handle. Fenced, it first claims the table with its epoch.
    pub fn spawn(
        name: String,
        table: DeltaTable,
        config: CommitterConfig,
        fencing: Fencing,
    ) -> Committer {
        let shared = Arc::new(Shared {
            table: name,
            config,
            fencing,
            queue: Mutex::new(Queue::default()),
            wake: Notify::new(),
        });
        let stop = CancellationToken::new();
        crate::delta_runtime::spawn(run(shared.clone(), table, stop.clone()));
        Committer { shared, stop }
    }

    /// The table this committer commits to.
    pub fn table(&self) -> &str {
        &self.shared.table
    }

    /// The committer's fencing.
    pub fn fencing(&self) -> Fencing {
        self.shared.fencing
    }

    /// Hand-offs and Parquet bytes pending (queued or being committed).
    pub fn pending(&self) -> (usize, u64) {
        let q = self.shared.queue();
        (q.count, q.bytes)
    }

    /// Hands `handoff` to the committer and waits for its answer: after the
    /// commit that holds it, at once when the log covers it, or a refusal.
    pub async fn hand_off(&self, handoff: HandOff) -> Answer {
        let s = &self.shared;
        if !handoff.table.eq_ignore_ascii_case(&s.table) {
            return Err(HandOffError::WrongTable {
                table: s.table.clone(),
                got: handoff.table,
            });
        }
        let (tx, rx) = oneshot::channel();
        {
            let mut q = s.queue();
            if let Some(deposed) = &q.deposed {
                return Err(deposed.clone());
            }
            if q.stopped {
                return Err(HandOffError::Stopped {
                    table: s.table.clone(),
                });
            }
            if let Some(e) = q.queued.iter_mut().find(|e| e.handoff.same_range(&handoff)) {
                e.waiters.push(tx);
            } else {
                let bytes = handoff.bytes();
                if q.count >= s.config.max_pending
                    || (q.count > 0 && q.bytes + bytes > s.config.max_pending_bytes)
                {
                    metrics::counter!("sluice_committer_busy_refusals_total", "table" => s.table.clone())
                        .increment(1);
                    return Err(HandOffError::Busy {
                        table: s.table.clone(),
                        pending: q.count,
                        bytes: q.bytes,
                    });
                }
                q.count += 1;
                q.bytes += bytes;
                s.gauges(&q);
                q.queued.push(Entry {
                    handoff,
                    waiters: vec![tx],
                    since: Instant::now(),
                    present: false,
                });
            }
        }
        s.wake.notify_one();
        rx.await.unwrap_or_else(|_| {
            Err(HandOffError::Stopped {
                table: s.table.clone(),
            })
        })
    }
}

/// The committer task: waits for hand-offs, keeps the commit rate, commits.
async fn run(shared: Arc<Shared>, mut table: DeltaTable, stop: CancellationToken) {
    let epoch = shared.fencing.epoch();
    metrics::gauge!("sluice_committer_epoch", "table" => shared.table.clone())
        .set(epoch.unwrap_or(0) as f64);
    if epoch.is_some() {
        if let Err(e) = claim(&shared, &mut table).await {
            tracing::warn!(table = %shared.table, "committer not started: {e}");
        }
    }
    let mut last_commit: Option<tokio::time::Instant> = None;
    loop {
        let woken = shared.wake.notified();
        let (ready, refused) = {
            let mut q = shared.queue();
            match q.deposed.clone() {
                // Hand-offs queued before the committer learnt it was deposed.
                Some(deposed) => (false, Some((std::mem::take(&mut q.queued), deposed))),
                None => (!q.queued.is_empty(), None),
            }
        };
        if let Some((queued, deposed)) = refused {
            shared.answer_all(queued, Err(deposed));
        }
        if !ready {
            tokio::select! {
                _ = woken => continue,
                _ = stop.cancelled() => break,
            }
        }
        if let Some(last) = last_commit {
            tokio::select! {
                _ = tokio::time::sleep_until(last + shared.config.interval) => {}
                _ = stop.cancelled() => break,
            }
        }
        let batch = std::mem::take(&mut shared.queue().queued);
        last_commit = Some(tokio::time::Instant::now());
        commit_batch(&shared, &mut table, batch).await;
    }
    let left = {
        let mut q = shared.queue();
        q.stopped = true;
        std::mem::take(&mut q.queued)
    };
    let table = shared.table.clone();
    shared.answer_all(left, Err(HandOffError::Stopped { table }));
}

/// Fenced start: records the epoch in the log (a commit with no data) unless
/// the log already holds it; refuses when it holds a newer one.
async fn claim(shared: &Shared, table: &mut DeltaTable) -> Result<(), HandOffError> {
    let failed = |e: &dyn std::fmt::Display| HandOffError::Commit {
        table: shared.table.clone(),
        message: e.to_string(),
    };
    for _ in 0..=COMMIT_ATTEMPTS {
        reload(table).await.map_err(|e| failed(&e))?;
        let held = log_epoch(table).await.map_err(|e| failed(&e))?;
        if let Err(deposed) = shared.fencing.check(&shared.table, held) {
            shared.queue().deposed = Some(deposed.clone());
            return Err(deposed);
        }
        if held == shared.fencing.epoch() {
            return Ok(());
        }
        let txn = shared.fencing.txn().map_err(|e| failed(&e))?;
        match commit_once(table, Vec::new(), txn.into_iter().collect(), None).await {
            Ok(version) => {
                tracing::info!(table = %shared.table, epoch = ?shared.fencing.epoch(), version, "committer claimed the table");
                return Ok(());
            }
            Err(e) if lost_race(&e) => continue,
            Err(e) => return Err(failed(&e)),
        }
    }
    Err(failed(&"the claim lost every race"))
}

/// Commits one batch of hand-offs (reloading and judging again after every
/// lost race) and answers each.
async fn commit_batch(shared: &Shared, table: &mut DeltaTable, mut batch: Vec<Entry>) {
    let oldest = batch.iter().map(|e| e.since).min();
    let mut attempt = 0;
    let mut first_read: Option<u64> = None;
    // Whether the handle was already loaded afresh after a failure.
    let mut fresh = false;
    while !batch.is_empty() {
        let failed = |e: &dyn std::fmt::Display| HandOffError::Commit {
            table: shared.table.clone(),
            message: e.to_string(),
        };
        let judged = async {
            reload(table).await.map_err(|e| failed(&e))?;
            let held = log_epoch(table).await.map_err(|e| failed(&e))?;
            shared.fencing.check(&shared.table, held)?;
            let refs: Vec<&HandOff> = batch.iter().map(|e| &e.handoff).collect();
            let marks = wal_marks(table, &refs).await.map_err(|e| failed(&e))?;
            Ok(judge(&shared.table, &refs, &marks))
        }
        .await;
        let verdicts = match judged {
            Ok(v) => v,
            Err(e) => {
                if matches!(e, HandOffError::Deposed { .. }) {
                    tracing::warn!(table = %shared.table, "{e}");
                    shared.queue().deposed = Some(e.clone());
                } else if !fresh {
                    fresh = load_afresh(shared, table, &e);
                    continue;
                }
                return shared.answer_all(batch, Err(e));
            }
        };
        let read_version = table.version().unwrap_or(0);
        let first_read = *first_read.get_or_insert(read_version);
        let schema = match super::schema_fence::schema_id(table) {
            Ok(id) => id,
            Err(e) => return shared.answer_all(batch, Err(failed(&e))),
        };
        let mut rest = Vec::new();
        for (entry, verdict) in batch.into_iter().zip(verdicts) {
            match verdict {
                Verdict::Commit => {
                    match super::schema_fence::check(&shared.table, &entry.handoff, &schema) {
                        Ok(()) => rest.push(entry),
                        Err(e) => {
                            tracing::info!(table = %shared.table, "hand-off refused: {e}");
                            metrics::counter!("sluice_committer_stale_schema_refusals_total")
                                .increment(1);
                            shared.answer(entry, &Err(e));
                        }
                    }
                }
                Verdict::Covered => shared.answer(
                    entry,
                    &Ok(HandOffAck {
                        version: read_version,
                        epoch: shared.fencing.epoch(),
                        covered: true,
                    }),
                ),
                Verdict::Refuse(e) => {
                    tracing::warn!(table = %shared.table, "hand-off refused: {e}");
                    shared.answer(entry, &Err(e));
                }
            }
        }
        batch = present(shared, table, rest).await;
        if batch.is_empty() {
            return;
        }
        let (adds, txns) = match actions(shared, &batch) {
            Ok(a) => a,
            Err(e) => return shared.answer_all(batch, Err(failed(&e))),
        };
        let files = adds.len();
        match commit_once(table, adds, txns, Some(first_read)).await {
            Ok(version) => {
                if let Some(oldest) = oldest {
                    metrics::histogram!("sluice_committer_commit_lag_seconds")
                        .record(oldest.elapsed().as_secs_f64());
                }
                metrics::histogram!("sluice_committer_files_per_commit").record(files as f64);
                let answer = Ok(HandOffAck {
                    version,
                    epoch: shared.fencing.epoch(),
                    covered: false,
                });
                return shared.answer_all(batch, answer);
            }
            Err(e) if lost_race(&e) && attempt < COMMIT_ATTEMPTS => {
                attempt += 1;
                metrics::counter!("sluice_sink_commit_races_total").increment(1);
            }
            Err(e) if !fresh => fresh = load_afresh(shared, table, &failed(&e)),
            Err(e) => return shared.answer_all(batch, Err(failed(&e))),
        }
    }
}

/// The entries of `batch` whose files are all in the store (checked once
/// per entry); the others are answered with their refusal.
async fn present(shared: &Shared, table: &DeltaTable, batch: Vec<Entry>) -> Vec<Entry> {
    let mut kept = Vec::with_capacity(batch.len());
    for mut entry in batch {
        if !entry.present {
            if let Err(e) = check_files(table, &entry.handoff).await {
                tracing::warn!(table = %shared.table, "hand-off refused: {e}");
                shared.answer(entry, &Err(e));
                continue;
            }
            entry.present = true;
        }
        kept.push(entry);
    }
    kept
}

/// After a failure other than a lost race (a store error, or a JSON commit
/// the handle's log segment still names was deleted by log retention), drops
/// the handle's state so the next attempt loads the table afresh from its
/// newest checkpoint; the failed commit may have landed, which the next
/// covered-check sees. Returns true (the fresh retry is used up).
fn load_afresh(shared: &Shared, table: &mut DeltaTable, e: &HandOffError) -> bool {
    tracing::info!(table = %shared.table, "{e}; loading the table afresh and trying again");
    table.state = None;
    true
}

/// The Add actions of `batch` and its `txn`s: one per pod WAL (highest
/// `to_lsn`), one per persistent stream (highest offset), the epoch's.
fn actions(
    shared: &Shared,
    batch: &[Entry],
) -> crate::error::Result<(Vec<deltalake::kernel::Add>, Vec<Transaction>)> {
    let mut wals: HashMap<&str, u64> = HashMap::new();
    let mut streams: HashMap<&str, i64> = HashMap::new();
    let mut adds = Vec::new();
    for e in batch {
        let h = &e.handoff;
        let lsn = wals.entry(h.wal_id.as_str()).or_insert(h.to_lsn);
        *lsn = (*lsn).max(h.to_lsn);
        for (id, offset) in &h.streams {
            let o = streams.entry(id.as_str()).or_insert(*offset);
            *o = (*o).max(*offset);
        }
        adds.extend(h.adds.iter().cloned());
    }
    let mut txns = Vec::with_capacity(wals.len() + streams.len() + 1);
    for (wal, lsn) in wals {
        txns.push(Transaction::new(wal, txn_version(lsn)?));
    }
    for (stream, offset) in streams {
        txns.push(Transaction::new(stream, offset));
    }
    txns.extend(shared.fencing.txn()?);
    Ok((adds, txns))
}
