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
//! The producers and their ledgers (unique ids, acks, unacked-at-kill snapshots) are in
//! `ledger.rs`, shared with the cluster test.
//!
//! CI runs 3 kills. The long run (≥ 100 kills):
//! `SLUICE_TORTURE_KILLS=100 cargo test --release -p sluice-server --test it crash_torture -- --nocapture`
//! (or `scripts/torture.sh 100`).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;

use crate::harness::Server;
use crate::ledger::{finish_producers, open_stream, produce, snapshot_unacked, Ledger, Verdict};

/// Producer streams.
const STREAMS: i64 = 8;
/// Small WAL segments with prepared (zero-filled) segments on, so that the kills also land
/// during rotations, adoptions of prepared segments and purges, not only during appends to
/// one big segment.
const WAL_SEGMENT_BYTES: &str = "262144";

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
    let mut server = Server::start_with_args(
        dir.path(),
        "500ms",
        &[
            "--wal-segment-bytes",
            WAL_SEGMENT_BYTES,
            "--wal-prepare-segments",
            "true",
        ],
    )
    .await;
    let table = "main.torture.records";
    let location = server
        .create_table_at(table, "id BIGINT NOT NULL, stream BIGINT, seq BIGINT")
        .await;

    let stop = Arc::new(AtomicBool::new(false));
    let mut ledgers = Vec::new();
    let mut producers = Vec::new();
    for s in 0..STREAMS {
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let stream = open_stream(&server.sdk(), table, &ledger).await;
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
    let mut rotations = 0.0;
    let mut prepared_rotations = 0.0;
    for kill in 0..kills {
        let uptime = Duration::from_millis(rng.random_range(200..1500));
        tokio::time::sleep(uptime).await;
        let counts = server
            .metrics(&[
                "sluice_wal_rotations_total",
                "sluice_wal_rotations_total{segment=\"prepared\"}",
            ])
            .await;
        rotations += counts[0];
        prepared_rotations += counts[1];
        server.kill();
        let unacked = snapshot_unacked(&ledgers, &mut unacked_at_kill);
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
    let sent = finish_producers(producers, Duration::from_secs(180), || {
        tail(&server.log()).to_string()
    })
    .await;
    // A graceful stop commits every memtable.
    server.terminate();

    let verdict = Verdict::of_table(&ledgers, &location, &unacked_at_kill).await;
    eprintln!(
        "crash torture: {kills} kills in {:.1?}; {sent} records sent, {} unacked at some kill; \
         {rotations} WAL rotations before the kills, {prepared_rotations} onto prepared segments; {}",
        started.elapsed(),
        unacked_at_kill.len(),
        verdict.summary()
    );
    verdict.assert_holds();
    assert!(
        prepared_rotations > 0.0,
        "the kills should land in a log that rotates onto prepared segments ({rotations} rotations)"
    );
}

fn tail(log: &str) -> &str {
    let start = log.len().saturating_sub(4000);
    let start = (start..log.len())
        .find(|i| log.is_char_boundary(*i))
        .unwrap_or(log.len());
    &log[start..]
}
