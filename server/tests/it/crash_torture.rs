//! Crash torture: the real server is SIGKILLed at random instants under load from many
//! official-SDK streams (recovery on), restarted on the same port and data directory, again
//! and again.
//!
//! Contract under test (ARCHITECTURE.md, invariants 1 and 2):
//! - every record whose ack a producer saw is in the Delta table at the end;
//! - a record appears more than once only if it was unacked at some kill (the SDK resent
//!   it after reconnecting: ephemeral streams are at-least-once); any other duplicate, and
//!   any acked record missing, fails the test.
//!
//! Each record carries a unique `id` (stream × 10⁹ + sequence). The SDK's ack callback
//! tells, per stream, the highest acked logical offset; at each kill the test snapshots
//! which ids were ingested but not yet acked.
//!
//! CI runs 3 kills. The long run (≥ 100 kills):
//! `SLUICE_TORTURE_KILLS=100 cargo test --release -p sluice-server --test it crash_torture -- --nocapture`
//! (or `scripts/torture.sh 100`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use databricks_zerobus_ingest_sdk::{AckCallback, JsonString, OffsetId, ZerobusStream};
use rand::Rng;

use crate::harness::{read_delta, Server, CLIENT_ID, CLIENT_SECRET};
use crate::rows::rows_as_json;

/// Producer streams.
const STREAMS: i64 = 8;
/// Ids of stream `s` are `s * ID_SPACE + seq`.
const ID_SPACE: i64 = 1_000_000_000;
/// Records a producer sends between two short pauses (keeps the load bounded).
const BURST: usize = 25;

/// What one producer has sent, by logical offset, and how far it was acked.
#[derive(Default)]
struct Ledger {
    ids: BTreeMap<OffsetId, i64>,
    acked_up_to: Option<OffsetId>,
    /// The id being handed to the SDK (its offset is not known yet).
    in_flight: Option<i64>,
}

impl Ledger {
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

fn lock(ledger: &Mutex<Ledger>) -> std::sync::MutexGuard<'_, Ledger> {
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

async fn open_stream(server: &Server, table: &str, ledger: &Arc<Mutex<Ledger>>) -> ZerobusStream {
    server
        .sdk()
        .stream_builder()
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
        .ack_callback(Arc::new(Acks(Arc::clone(ledger))))
        .build()
        .await
        .expect("json stream")
}

/// Sends records until `stop`, then flushes and closes. Returns an error text if the
/// stream failed for good.
async fn produce(
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
            let mut l = lock(&ledger);
            l.ids.insert(offset, id);
            l.in_flight = None;
            drop(l);
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

fn kills_wanted() -> usize {
    std::env::var("SLUICE_TORTURE_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_sigkills_at_random_instants_then_every_acked_record_is_in_delta_and_only_unacked_ones_repeat(
) {
    let kills = kills_wanted();
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start(dir.path(), "500ms").await;
    let table = "main.torture.records";
    let location = server
        .create_table_at(table, "id BIGINT NOT NULL, stream BIGINT, seq BIGINT")
        .await;

    let stop = Arc::new(AtomicBool::new(false));
    let mut ledgers = Vec::new();
    let mut producers = Vec::new();
    for s in 0..STREAMS {
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let stream = open_stream(&server, table, &ledger).await;
        producers.push(tokio::spawn(produce(
            stream,
            s,
            Arc::clone(&ledger),
            Arc::clone(&stop),
        )));
        ledgers.push(ledger);
    }

    let mut unacked_at_kill: HashSet<i64> = HashSet::new();
    let mut rng = rand::rng();
    for kill in 0..kills {
        let uptime = Duration::from_millis(rng.random_range(200..1500));
        tokio::time::sleep(uptime).await;
        server.kill();
        let mut unacked = 0;
        for ledger in &ledgers {
            let ledger = lock(ledger);
            for id in ledger.unacked() {
                unacked += 1;
                unacked_at_kill.insert(id);
            }
        }
        eprintln!(
            "kill {}/{kills} after {uptime:?} of uptime: {unacked} records unacked",
            kill + 1
        );
        // Down for a moment, so producers see the connection fail.
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..300))).await;
        server.restart().await;
    }

    // Let the producers reconnect and run a little, then drain them.
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let mut sent = 0;
    for p in producers {
        match tokio::time::timeout(Duration::from_secs(180), p).await {
            Ok(Ok(Ok(n))) => sent += n,
            Ok(Ok(Err(e))) => panic!("{e}\nserver log:\n{}", tail(&server.log())),
            Ok(Err(join)) => panic!("producer panicked: {join}"),
            Err(_) => panic!("a producer did not drain within 180 s"),
        }
    }
    // A graceful stop commits every memtable.
    server.terminate();

    let mut acked: HashSet<i64> = HashSet::new();
    let mut ingested = 0usize;
    for ledger in &ledgers {
        let ledger = lock(ledger);
        ingested += ledger.ids.len();
        acked.extend(ledger.acked());
    }
    let mut counts: HashMap<i64, usize> = HashMap::new();
    for row in rows_as_json(&read_delta(&location).await) {
        let id = row["id"].as_i64().expect("id column");
        *counts.entry(id).or_default() += 1;
    }
    let rows: usize = counts.values().sum();
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
    let bad_duplicates: Vec<&(i64, usize)> = duplicates
        .iter()
        .filter(|(id, _)| !unacked_at_kill.contains(id))
        .collect();
    let extra_rows: usize = duplicates.iter().map(|(_, n)| n - 1).sum();
    eprintln!(
        "crash torture: {kills} kills in {:.1?}; {sent} records sent, {ingested} offsets \
         ingested, {} acked, {} unacked at some kill; Delta holds {rows} rows, {} distinct ids; \
         {} ids duplicated ({extra_rows} extra rows), {} of them not allowed; {} acked ids missing",
        started.elapsed(),
        acked.len(),
        unacked_at_kill.len(),
        counts.len(),
        duplicates.len(),
        bad_duplicates.len(),
        missing.len(),
    );
    assert_eq!(acked.len(), ingested, "every record was acked in the end");
    assert!(
        missing.is_empty(),
        "acked ids missing from Delta (first 10): {:?}",
        &missing[..missing.len().min(10)]
    );
    assert!(
        bad_duplicates.is_empty(),
        "duplicates of ids that were acked at every kill (first 10): {:?}",
        &bad_duplicates[..bad_duplicates.len().min(10)]
    );
}

fn tail(log: &str) -> &str {
    let start = log.len().saturating_sub(4000);
    let start = (start..log.len())
        .find(|i| log.is_char_boundary(*i))
        .unwrap_or(log.len());
    &log[start..]
}
