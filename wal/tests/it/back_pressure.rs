//! Back-pressure: `reserve` waits while `max_queued_bytes` are reserved but not yet written.

use std::time::Duration;

use sluice_wal::{Wal, WalError};

use crate::common::open;

const LIMIT: usize = 1000;

fn limited(dir: &std::path::Path) -> (Wal, sluice_wal::Recovered) {
    let mut opts = crate::common::options(dir);
    opts.max_queued_bytes = LIMIT;
    open(opts)
}

/// Whether `reserve(bytes)` is still waiting after a short while.
async fn reserve_blocks(wal: &Wal, bytes: usize) -> bool {
    tokio::time::timeout(Duration::from_millis(100), wal.reserve(bytes))
        .await
        .is_err()
}

#[tokio::test]
async fn reserve_waits_while_the_queue_is_full_and_proceeds_once_the_writer_drains() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = limited(dir.path());
    let full = wal.reserve(LIMIT).await.expect("reserve the whole queue");
    assert!(reserve_blocks(&wal, 10).await);

    let waiter = tokio::spawn({
        let wal = wal.clone();
        async move { wal.reserve(10).await }
    });
    let end = wal.append(full, 1, vec![1; LIMIT]).expect("append");
    let reservation = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the writer drains the queue")
        .expect("task")
        .expect("reserve");
    assert!(
        wal.durable_lsn() >= end,
        "queue space returns only after the frame is written and published"
    );
    wal.append(reservation, 1, vec![2; 10]).expect("append");
}

#[tokio::test]
async fn a_reservation_larger_than_the_limit_takes_the_whole_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = limited(dir.path());
    let big = wal
        .reserve(5 * LIMIT)
        .await
        .expect("an oversized frame still fits alone");
    assert_eq!(big.bytes(), 5 * LIMIT);
    assert!(reserve_blocks(&wal, 1).await);
    let end = wal.append(big, 1, vec![3; 5 * LIMIT]).expect("append");
    wal.wait_durable(end).await.expect("durable");
    let small = tokio::time::timeout(Duration::from_secs(10), wal.reserve(1))
        .await
        .expect("space is back")
        .expect("reserve");
    drop(small);
}

#[tokio::test]
async fn dropping_a_reservation_without_appending_gives_its_bytes_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = limited(dir.path());
    let first = wal.reserve(LIMIT).await.expect("reserve");
    assert!(reserve_blocks(&wal, LIMIT).await);
    drop(first);
    tokio::time::timeout(Duration::from_secs(10), wal.reserve(LIMIT))
        .await
        .expect("space is back")
        .expect("reserve");
}

#[tokio::test]
async fn a_reserve_waiting_when_the_log_closes_fails_with_closed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = limited(dir.path());
    let _full = wal.reserve(LIMIT).await.expect("reserve");
    let waiter = tokio::spawn({
        let wal = wal.clone();
        async move { wal.reserve(1).await }
    });
    tokio::task::yield_now().await;
    wal.close().expect("close");
    let result = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("close wakes the waiter")
        .expect("task");
    assert!(matches!(result, Err(WalError::Closed)));
}
