//! An fdatasync error at server level, on a real file system: the WAL directory of a real
//! `sluice serve` is a FUSE passthrough (`tests/fuse/faulty_fs.py`, see `mounts.rs`) whose
//! fsync starts failing with EIO when the test arms it; the official Rust SDK produces; the
//! warehouse is an ordinary directory.
//!
//! Contract under test (issue #4, item 4): after an fdatasync error the WAL never acks again
//! from that process — fsync errors are not retryable on the same file, so syncs that
//! succeed again later change nothing. Producers get UNAVAILABLE naming the write-ahead log
//! and the I/O error (an open stream ends with it, a new stream is refused with it, before
//! and after the disk heals), no offset beyond what was acked before the fault is ever
//! acked, and the server does not panic. After a restart on the same directories the server
//! recovers: every record acked before the fault is in the Delta table exactly once (read
//! with Python `deltalake` and `polars`), and new records are acked again.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use databricks_zerobus_ingest_sdk::{JsonString, ZerobusError, ZerobusStream};

use crate::harness::{wait_for_rows, Server};
use crate::ledger::{ack_callback, lock, Ledger, Ledgers, Verdict};
use crate::moto::python_read;
use crate::mounts::{mounted_or_fail, serve_on_mount, skip_mount_test, FaultyFuse};
use crate::raw::{Call, OpenStream};

const TABLE: &str = "main.wal.eio";
const SEGMENT_BYTES: u64 = 1 << 20;
/// Records acked before the fault (offsets `0..BEFORE` of the first stream).
const BEFORE: i64 = 300;
/// Most records offered on the open stream once the fault is armed.
const DURING: i64 = 2_000;
/// Ids of the records pushed after the restart.
const AFTER: Range<i64> = 1_000_000..1_000_300;
const AFTER_COUNT: usize = (AFTER.end - AFTER.start) as usize;

/// A JSON stream without SDK recovery (its failure is the observation), acks into `ledger`.
async fn stream(
    server: &Server,
    ledger: &Arc<Mutex<Ledger>>,
) -> Result<ZerobusStream, ZerobusError> {
    server
        .unrecovered_json_stream(TABLE, Some(ack_callback(ledger)))
        .await
}

/// Hands records `ids` to the SDK until it refuses one; returns how many it took.
async fn push(s: &ZerobusStream, ledger: &Arc<Mutex<Ledger>>, ids: Range<i64>) -> usize {
    let mut taken = 0;
    for id in ids {
        let record = serde_json::json!({"id": id, "note": format!("n{id}")}).to_string();
        match s.ingest_record_offset(JsonString(record)).await {
            Ok(offset) => lock(ledger).sent(offset, id),
            Err(_) => break,
        }
        taken += 1;
    }
    taken
}

/// The status of a WAL that failed: UNAVAILABLE, naming the log and the I/O error.
fn assert_wal_failed(status: &tonic::Status, what: &str) {
    assert_eq!(
        status.code(),
        tonic::Code::Unavailable,
        "{what}: {status:?}"
    );
    let message = status.message();
    assert!(
        message.contains("write-ahead log") && message.contains("Input/output error"),
        "{what}: the message names the failed write-ahead log and the EIO: {message}"
    );
}

/// A new stream is refused with the WAL's UNAVAILABLE.
async fn assert_new_stream_refused(server: &Server, what: &str) {
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    match stream(server, &ledger).await {
        Err(ZerobusError::CreateStreamError(status)) => assert_wal_failed(&status, what),
        Err(other) => panic!("{what}: expected CreateStreamError(UNAVAILABLE), got {other:?}"),
        Ok(_) => panic!("{what}: a stream opened on a failed WAL"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_an_fdatasync_error_the_wal_never_acks_again_and_a_restart_recovers_every_acked_record(
) {
    if skip_mount_test("WAL fdatasync-error test on a FUSE mount") {
        return;
    }
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let wal_dir = dir.path().join("wal");
    let fuse = mounted_or_fail(
        FaultyFuse::mount(&dir.path().join("wal-backing"), &wal_dir),
        "a FUSE file system (tests/fuse/faulty_fs.py; needs root, /dev/fuse, Debian's \
         libfuse2 and fusepy in .venv, which scripts/test.sh installs)",
        &wal_dir,
    );
    let (mut server, location) = serve_on_mount(
        dir.path(),
        "200ms",
        SEGMENT_BYTES,
        TABLE,
        "id BIGINT NOT NULL, note STRING",
    )
    .await;

    // 1. Before the fault every record is acked; the first half also reaches Delta (the
    //    restart must not add it again), the second most likely only the WAL (the restart
    //    must replay it).
    let first = Arc::new(Mutex::new(Ledger::default()));
    let mut s = stream(&server, &first)
        .await
        .expect("stream before the fault");
    for (ids, reach_delta) in [(0..BEFORE / 2, true), (BEFORE / 2..BEFORE, false)] {
        let n = (ids.end - ids.start) as usize;
        assert_eq!(push(&s, &first, ids).await, n);
        s.flush()
            .await
            .expect("every record acked before the fault");
        if reach_delta {
            wait_for_rows(&location, n, Duration::from_secs(20)).await;
        }
    }

    // An idle raw gRPC stream opened beside it sees the exact status the server ends it
    // with (the SDK may report its own send failure instead when it loses that race).
    let token = server.token().await;
    let raw = OpenStream::open(Call {
        url: server.url.as_str(),
        table: TABLE,
        token: Some(token.as_str()),
    })
    .await
    .expect("raw stream before the fault");

    // 2. fdatasync fails: the open streams end with UNAVAILABLE and nothing more is acked.
    fuse.arm();
    let during = push(&s, &first, BEFORE..BEFORE + DURING).await;
    if during == 0 {
        // A background WAL frame (a purge's keeper frame after the first half reached
        // Delta) met the armed fault first and the server had ended the stream: the
        // checks below still hold (no ack past the last durable offset, every ack back).
        eprintln!("the WAL failed on a background frame before the SDK took a record");
    }
    match s.flush().await {
        Err(ZerobusError::StreamClosedError(status)) if status.code() == tonic::Code::Internal => {
            // The SDK's own "Failed to send batch": its sender met the stream the server
            // had ended before its receiver reported the server's status. The raw stream
            // below pins what the server sent.
            eprintln!("the SDK reported its own send failure: {status:?}");
        }
        Err(ZerobusError::StreamClosedError(status)) => assert_wal_failed(&status, "open stream"),
        Err(other) => panic!("expected the stream closed with UNAVAILABLE, got {other:?}"),
        Ok(()) => panic!("{during} records were acked although every fdatasync fails"),
    }
    // The server ends every open stream once its WAL fails, idle ones too.
    match raw.close().await {
        Some(status) => assert_wal_failed(&status, "idle raw stream open at the fault"),
        None => panic!("the raw stream ended OK although the WAL failed under it"),
    }
    // close() delivers every ack the SDK still holds (and reads late ones) to the callback.
    let _ = s.close().await;
    drop(s);
    assert!(
        fuse.refused_syncs() > 0,
        "the WAL's fdatasync met the fault:\n{}",
        fuse.log()
    );

    // 3. New streams are refused, also once fsync works again: the WAL failed for good.
    assert_new_stream_refused(&server, "new stream while fsync fails").await;
    fuse.disarm();
    assert_new_stream_refused(&server, "new stream after fsync works again").await;
    assert_eq!(
        lock(&first).acked_up_to(),
        Some(BEFORE - 1),
        "acks stop at the last offset durable before the fault"
    );
    let (status, health) = crate::health::healthz(&server.url).await;
    assert_eq!(
        status, 503,
        "the process stays up and says it is not healthy: {health}"
    );
    assert_eq!(health["status"], "unhealthy", "{health}");
    assert_eq!(health["reasons"][0]["check"], "wal", "{health}");
    let why = health["reasons"][0]["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("write-ahead log") && why.contains("Input/output error"),
        "/healthz names the failed WAL and the EIO: {why}"
    );
    let log = server.log_without_panic();
    assert!(
        log.contains("WAL can no longer make data durable"),
        "the log tells the failure:\n{log}"
    );

    // 4. Restart on the same directories: recovery, then ingest works again.
    server.kill();
    server.restart().await;
    let second = Arc::new(Mutex::new(Ledger::default()));
    let mut s = stream(&server, &second)
        .await
        .expect("stream after the restart");
    assert_eq!(push(&s, &second, AFTER).await, AFTER_COUNT);
    s.flush()
        .await
        .expect("every record after the restart acked");
    s.close().await.expect("close");
    server.terminate();
    server.log_without_panic();

    // 5. Delta holds every acked record once; the rest are records sent during the fault
    //    (written before their fdatasync failed, so replay may find them), none twice.
    let read = python_read(&location, &serde_json::json!({}));
    let ids: Vec<i64> = crate::rows::rows_as_json(&read.batches)
        .iter()
        .map(|row| row["id"].as_i64().expect("id column"))
        .collect();
    assert_eq!(
        (
            &read.summary["polars_rows"],
            &read.summary["polars_distinct_ids"]
        ),
        (&serde_json::json!(ids.len()), &serde_json::json!(ids.len())),
        "polars sees the rows deltalake read, each id once: {}",
        read.summary
    );
    let ledgers: Ledgers = vec![first, second];
    let verdict = Verdict::judge(&ledgers, ids.iter().copied(), &HashSet::new());
    eprintln!(
        "{during} records taken during the fault, {} refused syncs; {}; {:.1} s",
        fuse.refused_syncs(),
        verdict.summary(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(
        verdict.acked,
        BEFORE as usize + AFTER_COUNT,
        "the records before the fault and after the restart were acked, none in between"
    );
    assert!(
        verdict.missing.is_empty(),
        "acked ids missing: {:?}",
        verdict.missing
    );
    assert!(
        verdict.duplicates.is_empty(),
        "ids twice: {:?}",
        verdict.duplicates
    );
    let sent: HashSet<i64> = (0..BEFORE + during as i64).chain(AFTER).collect();
    let strangers: Vec<i64> = ids
        .iter()
        .filter(|id| !sent.contains(id))
        .copied()
        .collect();
    assert!(strangers.is_empty(), "ids never sent: {strangers:?}");
    drop(server);
    drop(fuse);
}
