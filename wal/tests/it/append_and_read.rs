//! Appending, durability publication, reading back, reopening, closing.

use sluice_wal::{Durability, Lsn, Wal, WalError};
use std::collections::{BTreeMap, HashSet};

use crate::common::{append, append_many, open, payload, read_all, small_segments};

/// Checks that `frames` tile the LSN space from `start` without gaps.
fn assert_contiguous(frames: &[sluice_wal::Frame], start: Lsn) {
    let mut next = start;
    for f in frames {
        assert_eq!(f.lsn, next, "frames must be contiguous");
        assert_eq!(f.end_lsn, f.lsn + 9 + f.payload.len() as u64);
        next = f.end_lsn;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn given_many_concurrent_tasks_when_the_log_is_reopened_then_every_frame_reads_back_in_lsn_order_with_its_payload(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(small_segments(dir.path()));
    let mut tasks = Vec::new();
    for task in 0..8u8 {
        let wal = wal.clone();
        tasks.push(tokio::spawn(async move {
            let mut ends = Vec::new();
            for seq in 0..150u32 {
                let mut p = vec![task];
                p.extend_from_slice(&seq.to_le_bytes());
                p.extend_from_slice(&payload(seq as usize));
                ends.push((append(&wal, task + 1, p.clone()).await, p));
            }
            ends
        }));
    }
    let mut expected = BTreeMap::new();
    for t in tasks {
        let ends = t.await.expect("task");
        assert!(
            ends.windows(2).all(|w| w[0].0 < w[1].0),
            "LSNs follow append order"
        );
        expected.extend(ends);
    }
    let last = *expected.keys().last().expect("frames");
    wal.wait_durable(last).await.expect("durable");
    wal.close().expect("close");

    let (wal, recovered) = open(small_segments(dir.path()));
    assert_eq!(recovered.end_lsn, last);
    let frames = read_all(&wal, 0);
    assert_eq!(frames.len(), 8 * 150);
    assert_contiguous(&frames, 0);
    for f in &frames {
        assert_eq!(expected.get(&f.end_lsn), Some(&f.payload));
        assert_eq!(f.kind, f.payload[0] + 1);
    }
}

#[test]
fn given_many_os_threads_appending_when_reopened_then_nothing_is_lost_or_reordered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (wal, _) = open(crate::common::options(dir.path()));
    let handle = rt.handle().clone();
    let threads: Vec<_> = (0..6u8)
        .map(|t| {
            let wal = wal.clone();
            let handle = handle.clone();
            std::thread::spawn(move || {
                (0..200usize)
                    .map(|i| {
                        let mut p = payload(i);
                        p.push(t);
                        let end = handle.block_on(append(&wal, 7, p.clone()));
                        (end, p)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut expected = BTreeMap::new();
    for t in threads {
        expected.extend(t.join().expect("thread"));
    }
    wal.close().expect("close");
    let (wal, _) = open(crate::common::options(dir.path()));
    let frames = read_all(&wal, 0);
    assert_contiguous(&frames, 0);
    let got: BTreeMap<_, _> = frames.into_iter().map(|f| (f.end_lsn, f.payload)).collect();
    assert_eq!(got, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn durable_lsn_never_exceeds_what_was_appended_and_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(small_segments(dir.path()));
    let mut rx = wal.subscribe();
    let watcher = tokio::spawn(async move {
        let mut seen = Vec::new();
        while rx.changed().await.is_ok() {
            let s = rx.borrow_and_update().clone();
            assert!(s.failed.is_none());
            seen.push(s.durable);
        }
        seen
    });
    let producers: Vec<_> = (0..4)
        .map(|t| {
            let wal = wal.clone();
            tokio::spawn(async move {
                let mut ends = Vec::new();
                for i in 0..200 {
                    ends.push(append(&wal, 1, payload(i + t * 1000)).await);
                }
                ends
            })
        })
        .collect();
    let mut ends: HashSet<Lsn> = HashSet::new();
    for p in producers {
        ends.extend(p.await.expect("producer"));
    }
    let last = *ends.iter().max().expect("ends");
    wal.wait_durable(last).await.expect("durable");
    assert_eq!(wal.durable_lsn(), last);
    wal.close().expect("close");
    drop(wal);
    let seen = watcher.await.expect("watcher");
    assert!(!seen.is_empty());
    assert!(
        seen.windows(2).all(|w| w[0] <= w[1]),
        "durable only moves forward"
    );
    for d in &seen {
        assert!(
            ends.contains(d),
            "durable {d} is the end of an appended frame"
        );
    }
    let (_wal, recovered) = open(small_segments(dir.path()));
    assert!(seen.iter().all(|&d| d <= recovered.end_lsn));
}

#[tokio::test]
async fn reopening_continues_lsns_where_the_previous_life_ended() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, recovered) = open(crate::common::options(dir.path()));
    assert_eq!((recovered.start_lsn, recovered.end_lsn), (0, 0));
    let first = append_many(&wal, 0..3).await;
    wal.close().expect("close");

    let (wal, recovered) = open(crate::common::options(dir.path()));
    let end = first.last().expect("frames").end_lsn;
    assert_eq!((recovered.start_lsn, recovered.end_lsn), (0, end));
    let second = append_many(&wal, 3..5).await;
    assert_eq!(second[0].lsn, end);
    wal.close().expect("close");

    let (wal, recovered) = open(crate::common::options(dir.path()));
    assert_eq!(recovered.end_lsn, second[1].end_lsn);
    let all: Vec<_> = first.into_iter().chain(second).collect();
    assert_eq!(read_all(&wal, 0), all);
}

#[tokio::test]
async fn reopening_an_untouched_log_again_and_again_keeps_it_empty_and_healthy() {
    let dir = tempfile::tempdir().expect("tempdir");
    for _ in 0..3 {
        let (wal, recovered) = open(crate::common::options(dir.path()));
        assert_eq!(recovered.end_lsn, 0);
        wal.close().expect("close");
    }
    let (wal, _) = open(crate::common::options(dir.path()));
    let frames = append_many(&wal, 0..2).await;
    assert_eq!(read_all(&wal, 0), frames);
}

#[tokio::test]
async fn close_writes_and_syncs_everything_queued_before_returning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = crate::common::options(dir.path());
    opts.durability = Durability::UnsafeNoSync;
    let (wal, _) = open(opts.clone());
    let mut last = 0;
    for i in 0..500 {
        last = append(&wal, 1, payload(i)).await;
    }
    wal.close().expect("close");
    assert_eq!(wal.durable_lsn(), last);
    wal.wait_durable(last)
        .await
        .expect("everything appended is durable after close");
    let (wal, recovered) = open(opts);
    assert_eq!(recovered.end_lsn, last);
    assert_eq!(read_all(&wal, 0).len(), 500);
}

#[tokio::test]
async fn appends_and_reservations_after_close_fail_with_closed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(crate::common::options(dir.path()));
    let reservation = wal.reserve(3).await.expect("reserve");
    let end = append(&wal, 1, b"one".to_vec()).await;
    wal.close().expect("close");
    wal.close().expect("a second close does nothing");
    assert!(matches!(
        wal.append(reservation, 1, b"two".to_vec()),
        Err(WalError::Closed)
    ));
    assert!(matches!(wal.reserve(1).await, Err(WalError::Closed)));
    assert!(matches!(
        wal.wait_durable(end + 1).await,
        Err(WalError::Closed)
    ));
    wal.wait_durable(end)
        .await
        .expect("what was appended stays durable");
}

#[tokio::test]
async fn read_from_an_lsn_inside_the_log_returns_only_frames_ending_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(crate::common::options(dir.path()));
    let frames = append_many(&wal, 0..10).await;
    assert_eq!(read_all(&wal, 0), frames, "the live log reads back");
    assert_eq!(read_all(&wal, frames[2].end_lsn), frames[3..]);
    assert_eq!(read_all(&wal, frames[2].end_lsn + 1), frames[3..]);
    assert_eq!(read_all(&wal, frames[3].end_lsn - 1), frames[3..]);
    assert!(read_all(&wal, frames[9].end_lsn).is_empty());
    assert!(read_all(&wal, u64::MAX).is_empty());
}

#[tokio::test]
async fn the_log_id_is_created_on_first_open_and_stays_the_same_after_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(crate::common::options(dir.path()));
    let id = wal.id().to_owned();
    assert_eq!(id.len(), 32);
    wal.close().expect("close");
    let (wal, _) = open(crate::common::options(dir.path()));
    assert_eq!(wal.id(), id);
    let stored = std::fs::read_to_string(dir.path().join("wal-id")).expect("wal-id file");
    assert_eq!(stored.trim(), id);

    let other = tempfile::tempdir().expect("tempdir");
    let (other_wal, _) = open(crate::common::options(other.path()));
    assert_ne!(other_wal.id(), id, "each log gets its own id");
}

#[tokio::test]
async fn a_second_open_of_the_same_directory_is_refused_while_the_first_is_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(crate::common::options(dir.path()));
    assert!(matches!(
        Wal::open(crate::common::options(dir.path())),
        Err(WalError::Locked(_))
    ));
    wal.close().expect("close");
    let (_wal, _) = open(crate::common::options(dir.path()));
}

#[tokio::test]
async fn dropping_every_handle_closes_the_log_so_it_can_be_reopened() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(crate::common::options(dir.path()));
    let frames = append_many(&wal, 0..4).await;
    drop(wal);
    let (wal, _) = open(crate::common::options(dir.path()));
    assert_eq!(read_all(&wal, 0), frames);
}

#[tokio::test]
async fn a_kind_zero_frame_with_an_empty_payload_is_refused_because_it_reads_as_end_of_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(crate::common::options(dir.path()));
    let r = wal.reserve(0).await.expect("reserve");
    assert!(matches!(
        wal.append(r, 0, Vec::new()),
        Err(WalError::InvalidArgument(_))
    ));
    let empty = append(&wal, 1, Vec::new()).await;
    let zero_kind = append(&wal, 0, b"x".to_vec()).await;
    wal.wait_durable(zero_kind).await.expect("durable");
    let frames = read_all(&wal, 0);
    assert_eq!(frames.len(), 2);
    assert_eq!((frames[0].end_lsn, frames[0].kind), (empty, 1));
    assert_eq!((frames[1].end_lsn, frames[1].kind), (zero_kind, 0));
}

#[tokio::test]
async fn subscribers_see_the_durable_lsn_reach_every_appended_frame() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(crate::common::options(dir.path()));
    let mut rx = wal.subscribe();
    let end = append(&wal, 1, b"hello".to_vec()).await;
    let state = rx
        .wait_for(|s| s.durable >= end)
        .await
        .expect("writer alive")
        .clone();
    assert_eq!(state.durable, end);
    assert!(state.failed.is_none());
}
