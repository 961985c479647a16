//! A full disk stalls the writer; nothing is acked meanwhile, new work gets `NoSpace`, and
//! everything resumes when space returns.

use std::time::Duration;

use sluice_wal::env::FaultyFileSystem;
use sluice_wal::{Lsn, Wal, WalError};

use crate::common::{append, append_many, payload, read_all};
use crate::support::{open_faulty, reopen_strict};

async fn until_stalled(wal: &Wal) -> String {
    for _ in 0..500 {
        if let Some(reason) = wal.no_space() {
            return reason;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("the writer never reported a full disk");
}

/// Appends until the writer stalls, returning the end LSNs appended.
async fn append_until_refused(wal: &Wal) -> Vec<(Lsn, Vec<u8>)> {
    let mut appended = Vec::new();
    for i in 100..10_000 {
        let p = payload(i);
        let reserved = match wal.reserve(p.len()).await {
            Ok(r) => r,
            Err(e) => {
                assert!(matches!(e, WalError::NoSpace { .. }), "{e}");
                return appended;
            }
        };
        match wal.append(reserved, 1, p.clone()) {
            Ok(end) => appended.push((end, p)),
            Err(e) => {
                assert!(matches!(e, WalError::NoSpace { .. }), "{e}");
                return appended;
            }
        }
        tokio::task::yield_now().await;
    }
    panic!("a full disk never refused an append");
}

async fn given_a_full_disk_then_nothing_is_acked_and_ingest_resumes(
    full: impl Fn(bool, &FaultyFileSystem),
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, fs) = open_faulty(dir.path());
    let acked = append_many(&wal, 0..20).await;
    let durable_before = wal.durable_lsn();

    full(true, &fs);
    let appended = append_until_refused(&wal).await;
    let reason = until_stalled(&wal).await;
    assert!(reason.contains("os error 28"), "{reason}");
    let (held, _) = appended
        .first()
        .cloned()
        .expect("something was queued before the refusal");
    let (last, _) = appended.last().cloned().expect("something was queued");
    assert!(matches!(
        wal.reserve(10).await,
        Err(WalError::NoSpace { .. })
    ));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let state = wal.subscribe().borrow().clone();
    assert!(state.failed.is_none(), "a full disk is not a failure");
    assert!(
        state.durable < last,
        "the held batch is not acked during the stall"
    );
    assert!(state.durable >= durable_before);

    full(false, &fs);
    wal.wait_durable(last)
        .await
        .expect("the held frames are acked once space returns");
    assert!(wal.no_space().is_none());
    let more = append_many(&wal, 500..520).await;
    wal.close().expect("close");
    drop(wal);

    let (wal, _) = reopen_strict(dir.path());
    let all = read_all(&wal, 0);
    assert_eq!(all[..acked.len()], acked[..]);
    let expected: Vec<_> = appended.iter().map(|(end, p)| (*end, p.clone())).collect();
    let got: Vec<_> = all[acked.len()..acked.len() + appended.len()]
        .iter()
        .map(|f| (f.end_lsn, f.payload.clone()))
        .collect();
    assert_eq!(got, expected);
    assert_eq!(all[acked.len()].end_lsn, held);
    assert_eq!(all[all.len() - more.len()..], more[..]);
}

#[tokio::test]
async fn given_enospc_on_every_write_and_create_when_space_returns_then_ingest_resumes() {
    given_a_full_disk_then_nothing_is_acked_and_ingest_resumes(|full, fs| fs.set_disk_full(full))
        .await;
}

#[tokio::test]
async fn given_enospc_only_when_preallocating_the_next_segment_when_space_returns_then_ingest_resumes(
) {
    given_a_full_disk_then_nothing_is_acked_and_ingest_resumes(|full, fs| {
        fs.set_create_error(full.then_some(libc::ENOSPC))
    })
    .await;
}

#[tokio::test]
async fn given_a_full_disk_when_the_log_is_closed_then_close_reports_no_space_and_the_acked_data_survives(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, fs) = open_faulty(dir.path());
    let acked = append_many(&wal, 0..5).await;
    fs.set_disk_full(true);
    let _held = append(&wal, 1, payload(5)).await;
    until_stalled(&wal).await;
    assert!(matches!(wal.close(), Err(WalError::NoSpace { .. })));
    drop(wal);
    let (wal, _) = reopen_strict(dir.path());
    assert_eq!(read_all(&wal, 0), acked);
}

#[tokio::test]
async fn given_a_full_disk_when_close_arrives_with_the_last_batch_then_close_returns_no_space_at_once(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, fs) = open_faulty(dir.path());
    let acked = append_many(&wal, 0..5).await;
    fs.set_disk_full(true);
    // Appended and closed back to back: the close is likely gathered with the frame.
    let _unacked = append(&wal, 1, payload(5)).await;
    let closing = tokio::task::spawn_blocking(move || wal.close());
    let closed = tokio::time::timeout(Duration::from_secs(10), closing)
        .await
        .expect("close does not wait for space")
        .expect("join");
    assert!(
        matches!(closed, Err(WalError::NoSpace { .. })),
        "{closed:?}"
    );
    let (wal, _) = reopen_strict(dir.path());
    assert_eq!(read_all(&wal, 0), acked);
}
