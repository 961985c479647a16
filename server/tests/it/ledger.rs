//! The producers' side of the durability tests (crash torture, cluster, WAL EIO): official-SDK
//! streams that send records with unique ids and a ledger per stream of what was sent and
//! how far it was acked, and the final accounting against the Delta table.
//!
//! Each record carries a unique `id` (stream × 10⁹ + sequence). The SDK's ack callback
//! tells, per stream, the highest acked logical offset; at each kill the test snapshots
//! which ids were ingested but not yet acked: only those may appear twice in the table
//! (ephemeral streams are at-least-once across a reconnect).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use databricks_zerobus_ingest_sdk::{AckCallback, JsonString, OffsetId, ZerobusSdk, ZerobusStream};

use crate::harness::{CLIENT_ID, CLIENT_SECRET};

/// Ids of stream `s` are `s * ID_SPACE + seq`.
pub const ID_SPACE: i64 = 1_000_000_000;
/// Records a producer sends between two short pauses (keeps the load bounded).
const BURST: usize = 25;

/// What one producer has sent, by logical offset, and how far it was acked.
#[derive(Default)]
pub struct Ledger {
    ids: BTreeMap<OffsetId, i64>,
    acked_up_to: Option<OffsetId>,
    /// The id being handed to the SDK (its offset is not known yet).
    in_flight: Option<i64>,
}

impl Ledger {
    /// Notes that `id` went out at logical `offset` (it is no longer in flight).
    pub fn sent(&mut self, offset: OffsetId, id: i64) {
        self.ids.insert(offset, id);
        self.in_flight = None;
    }

    /// The highest offset the SDK reported acked.
    pub fn acked_up_to(&self) -> Option<OffsetId> {
        self.acked_up_to
    }

    fn unacked(&self) -> impl Iterator<Item = i64> + '_ {
        let from = self
            .acked_up_to
            .map_or(OffsetId::MIN, |a| a.saturating_add(1));
        self.ids
            .range(from..)
            .map(|(_, id)| *id)
            .chain(self.in_flight)
    }

    fn acked(&self) -> impl Iterator<Item = i64> + '_ {
        let up_to = self.acked_up_to;
        self.ids
            .iter()
            .filter(move |(o, _)| up_to.is_some_and(|a| **o <= a))
            .map(|(_, id)| *id)
    }
}

/// Shared ledgers of all producers.
pub type Ledgers = Vec<Arc<Mutex<Ledger>>>;

/// Locks a ledger (a panicked producer leaves it readable).
pub fn lock(ledger: &Mutex<Ledger>) -> std::sync::MutexGuard<'_, Ledger> {
    ledger.lock().unwrap_or_else(|e| e.into_inner())
}

struct Acks(Arc<Mutex<Ledger>>);

impl AckCallback for Acks {
    fn on_ack(&self, offset_id: OffsetId) {
        let mut ledger = lock(&self.0);
        ledger.acked_up_to = Some(ledger.acked_up_to.map_or(offset_id, |a| a.max(offset_id)));
    }

    fn on_error(&self, offset_id: OffsetId, error_message: &str) {
        eprintln!("ack error at offset {offset_id}: {error_message}");
    }
}

/// An ack callback that feeds `ledger`.
pub fn ack_callback(ledger: &Arc<Mutex<Ledger>>) -> Arc<dyn AckCallback> {
    Arc::new(Acks(Arc::clone(ledger)))
}

/// A JSON stream with recovery on (patient enough for kills and drains) and `ledger` fed by
/// its acks.
pub async fn open_stream(
    sdk: &ZerobusSdk,
    table: &str,
    ledger: &Arc<Mutex<Ledger>>,
) -> ZerobusStream {
    sdk.stream_builder()
        .table(table)
        .oauth(CLIENT_ID, CLIENT_SECRET)
        .json()
        .recovery(true)
        .recovery_retries(10_000)
        .recovery_timeout_ms(10_000)
        .recovery_backoff_ms(100)
        .server_lack_of_ack_timeout_ms(30_000)
        .flush_timeout_ms(120_000)
        .max_inflight_requests(20_000)
        .ack_callback(ack_callback(ledger))
        .build()
        .await
        .expect("json stream")
}

/// Sends records until `stop`, then flushes and closes. Returns the records sent, or an
/// error text if the stream failed for good.
pub async fn produce(
    stream: ZerobusStream,
    stream_no: i64,
    ledger: Arc<Mutex<Ledger>>,
    stop: Arc<AtomicBool>,
) -> Result<u64, String> {
    let mut stream = stream;
    let mut seq: i64 = 0;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..BURST {
            let id = stream_no * ID_SPACE + seq;
            let record = serde_json::json!({"id": id, "stream": stream_no, "seq": seq});
            // Marked in flight first, so that a kill during the call counts it unacked.
            lock(&ledger).in_flight = Some(id);
            let offset = stream
                .ingest_record_offset(JsonString(record.to_string()))
                .await
                .map_err(|e| format!("stream {stream_no}: ingest failed: {e}"))?;
            lock(&ledger).sent(offset, id);
            seq += 1;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stream
        .flush()
        .await
        .map_err(|e| format!("stream {stream_no}: final flush failed: {e}"))?;
    stream
        .close()
        .await
        .map_err(|e| format!("stream {stream_no}: close failed: {e}"))?;
    Ok(seq as u64)
}

/// Waits for every producer (each at most `timeout`); returns the records sent. A failed
/// producer fails the test, with `log()` (the relevant server log) in the message.
pub async fn finish_producers(
    producers: Vec<tokio::task::JoinHandle<Result<u64, String>>>,
    timeout: Duration,
    log: impl Fn() -> String,
) -> u64 {
    let mut sent = 0;
    for p in producers {
        match tokio::time::timeout(timeout, p).await {
            Ok(Ok(Ok(n))) => sent += n,
            Ok(Ok(Err(e))) => panic!(
                "{e}
log:
{}",
                log()
            ),
            Ok(Err(join)) => panic!("producer panicked: {join}"),
            Err(_) => panic!("a producer did not finish within {timeout:?}"),
        }
    }
    sent
}

/// Adds every id not acked yet to `unacked`; returns how many there were.
pub fn snapshot_unacked(ledgers: &Ledgers, unacked: &mut HashSet<i64>) -> usize {
    let mut n = 0;
    for ledger in ledgers {
        for id in lock(ledger).unacked() {
            n += 1;
            unacked.insert(id);
        }
    }
    n
}

/// The final accounting of acked ids against the ids found in the table.
pub struct Verdict {
    /// Offsets ingested over all streams.
    pub ingested: usize,
    /// Distinct ids acked.
    pub acked: usize,
    /// Rows in the table.
    pub rows: usize,
    /// Distinct ids in the table.
    pub distinct: usize,
    /// Ids present more than once, with their counts.
    pub duplicates: Vec<(i64, usize)>,
    /// Duplicates of ids that were never unacked at a kill.
    pub bad_duplicates: Vec<(i64, usize)>,
    /// Acked ids not in the table.
    pub missing: Vec<i64>,
}

impl Verdict {
    /// Compares the ledgers with the table's `ids`; `may_repeat` are the ids that were
    /// unacked at some kill.
    pub fn judge(
        ledgers: &Ledgers,
        ids: impl IntoIterator<Item = i64>,
        may_repeat: &HashSet<i64>,
    ) -> Verdict {
        let mut acked: HashSet<i64> = HashSet::new();
        let mut ingested = 0usize;
        for ledger in ledgers {
            let ledger = lock(ledger);
            ingested += ledger.ids.len();
            acked.extend(ledger.acked());
        }
        let mut counts: HashMap<i64, usize> = HashMap::new();
        for id in ids {
            *counts.entry(id).or_default() += 1;
        }
        let missing: Vec<i64> = acked
            .iter()
            .filter(|id| !counts.contains_key(id))
            .copied()
            .collect();
        let duplicates: Vec<(i64, usize)> = counts
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(id, n)| (*id, *n))
            .collect();
        let bad_duplicates = duplicates
            .iter()
            .filter(|(id, _)| !may_repeat.contains(id))
            .copied()
            .collect();
        Verdict {
            ingested,
            acked: acked.len(),
            rows: counts.values().sum(),
            distinct: counts.len(),
            duplicates,
            bad_duplicates,
            missing,
        }
    }

    /// [`Verdict::judge`] on the `id` column of the Delta table at `location`.
    pub async fn of_table(ledgers: &Ledgers, location: &str, may_repeat: &HashSet<i64>) -> Verdict {
        let ids = crate::rows::rows_as_json(&crate::harness::read_delta(location).await)
            .iter()
            .map(|row| row["id"].as_i64().expect("id column"))
            .collect::<Vec<_>>();
        Verdict::judge(ledgers, ids, may_repeat)
    }

    /// One line for the test log.
    pub fn summary(&self) -> String {
        let extra: usize = self.duplicates.iter().map(|(_, n)| n - 1).sum();
        format!(
            "{} offsets ingested, {} acked; Delta holds {} rows, {} distinct ids; {} ids \
             duplicated ({extra} extra rows), {} of them not allowed; {} acked ids missing",
            self.ingested,
            self.acked,
            self.rows,
            self.distinct,
            self.duplicates.len(),
            self.bad_duplicates.len(),
            self.missing.len()
        )
    }

    /// Fails the test unless every record was acked, none is missing and only allowed ids
    /// repeat.
    pub fn assert_holds(&self) {
        assert_eq!(
            self.acked, self.ingested,
            "every record was acked in the end"
        );
        assert!(
            self.missing.is_empty(),
            "acked ids missing from Delta (first 10): {:?}",
            &self.missing[..self.missing.len().min(10)]
        );
        assert!(
            self.bad_duplicates.is_empty(),
            "duplicates of ids that were acked at every kill (first 10): {:?}",
            &self.bad_duplicates[..self.bad_duplicates.len().min(10)]
        );
    }
}
