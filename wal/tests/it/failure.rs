//! A write-side failure is final: the log never acknowledges again.

use sluice_wal::{Lsn, WalError};

use crate::common::{append, open, payload, small_segments};

fn is_failed<T>(r: &Result<T, WalError>) -> bool {
    matches!(r, Err(WalError::Failed(_)))
}

#[tokio::test]
async fn given_the_log_directory_vanishes_when_the_writer_must_rotate_then_the_log_fails_for_good()
{
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(small_segments(dir.path()));
    let first = append(&wal, 1, payload(1)).await;
    wal.wait_durable(first).await.expect("durable");

    // Creating the next segment will fail: its directory is gone.
    std::fs::remove_dir_all(dir.path()).expect("remove the log directory");
    let mut last: Lsn = first;
    for i in 0..100 {
        match wal.reserve(100).await {
            Ok(r) => match wal.append(r, 1, payload(i)) {
                Ok(end) => last = end,
                Err(e) => {
                    assert!(matches!(e, WalError::Failed(_)), "{e}");
                    break;
                }
            },
            Err(e) => {
                assert!(matches!(e, WalError::Failed(_)), "{e}");
                break;
            }
        }
    }
    assert!(is_failed(&wal.wait_durable(last).await));
    let state = wal.subscribe().borrow().clone();
    assert!(state.failed.is_some());
    assert!(
        state.durable < last,
        "nothing past the failure is acknowledged"
    );
    assert!(state.durable >= first);
    assert!(is_failed(&wal.reserve(1).await));
    assert!(is_failed(&wal.close()));
}
