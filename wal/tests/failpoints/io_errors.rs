//! Short writes are absorbed; `EIO` on write or on `fdatasync` is final.

use sluice_wal::WalError;

use crate::common::{append, append_many, payload, read_all};
use crate::support::{open_faulty, reopen, reopen_strict};

#[tokio::test]
async fn given_short_writes_when_appending_then_every_frame_reads_back_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, fs) = open_faulty(dir.path());
    fs.set_short_writes(true);
    let frames = append_many(&wal, 0..200).await;
    assert_eq!(read_all(&wal, 0), frames);
    wal.close().expect("close");
    drop(wal);
    let (wal, recovered) = reopen_strict(dir.path());
    assert_eq!(recovered.end_lsn, frames[199].end_lsn);
    assert_eq!(read_all(&wal, 0), frames);
}

#[tokio::test]
async fn given_fdatasync_fails_with_eio_then_the_log_never_acks_again_and_waiters_get_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, fs) = open_faulty(dir.path());
    let acked = append_many(&wal, 0..10).await;
    let durable_before = wal.durable_lsn();

    fs.set_sync_error(Some(libc::EIO));
    let lost = append(&wal, 1, payload(10)).await;
    let waited = wal.wait_durable(lost).await;
    assert!(matches!(waited, Err(WalError::Failed(_))), "{waited:?}");
    let state = wal.subscribe().borrow().clone();
    assert!(state.failed.is_some(), "failed is published");
    assert_eq!(
        state.durable, durable_before,
        "nothing past the error is acked"
    );

    // Healing the disk changes nothing: a failed fdatasync is never retried.
    fs.set_sync_error(None);
    assert!(matches!(wal.reserve(10).await, Err(WalError::Failed(_))));
    assert!(matches!(
        wal.wait_durable(lost).await,
        Err(WalError::Failed(_))
    ));
    assert_eq!(wal.durable_lsn(), durable_before);
    assert!(wal.close().is_err());
    drop(wal);

    // A restarted process recovers at least everything acked.
    let (wal, recovered) = reopen(dir.path());
    assert!(recovered.end_lsn >= durable_before);
    assert_eq!(read_all(&wal, 0)[..acked.len()], acked[..]);
}

#[tokio::test]
async fn given_eio_on_write_then_the_log_fails_for_good() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, fs) = open_faulty(dir.path());
    let acked = append_many(&wal, 0..5).await;
    fs.set_write_error(Some(libc::EIO));
    let lost = append(&wal, 1, payload(5)).await;
    assert!(matches!(
        wal.wait_durable(lost).await,
        Err(WalError::Failed(_))
    ));
    fs.set_write_error(None);
    assert!(matches!(wal.reserve(1).await, Err(WalError::Failed(_))));
    assert_eq!(wal.durable_lsn(), acked[4].end_lsn);
    assert!(wal.subscribe().borrow().failed.is_some());
    drop(wal);
    let (wal, _) = reopen_strict(dir.path());
    assert_eq!(read_all(&wal, 0), acked);
}
