//! A power cut drops every write since the last successful sync; reopening recovers exactly
//! the synced prefix and never loses an acked frame.

use sluice_wal::{Frame, Lsn, Wal};

use crate::common::{append, append_many, payload, read_all, FRAME_HEADER_LEN};
use crate::support::{open_faulty, reopen_strict};

#[tokio::test]
async fn given_writes_that_were_never_synced_when_the_power_is_cut_then_reopen_recovers_exactly_the_synced_prefix(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, fs) = open_faulty(dir.path());
    let acked = append_many(&wal, 0..50).await;

    // The next batch reaches the page cache but its fdatasync fails: never synced.
    fs.set_sync_error(Some(libc::EIO));
    let unsynced = append(&wal, 1, payload(50)).await;
    assert!(wal.wait_durable(unsynced).await.is_err());
    fs.power_cut().expect("power cut");
    drop(wal);

    let (wal, recovered) = reopen_strict(dir.path());
    assert_eq!(recovered.end_lsn, acked[49].end_lsn);
    assert_eq!(recovered.truncated_bytes, 0);
    assert_eq!(read_all(&wal, 0), acked);
}

/// Appends from several tasks until told to stop, recording every frame in LSN order.
async fn producers(wal: &Wal, tasks: usize, per_task: usize) -> Vec<Frame> {
    let mut handles = Vec::new();
    for t in 0..tasks {
        let wal = wal.clone();
        handles.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            for i in 0..per_task {
                let p = payload(t * per_task + i);
                let Ok(r) = wal.reserve(p.len()).await else {
                    break;
                };
                let Ok(end) = wal.append(r, 1, p.clone()) else {
                    break;
                };
                mine.push(Frame {
                    lsn: end - FRAME_HEADER_LEN - p.len() as Lsn,
                    end_lsn: end,
                    kind: 1,
                    payload: p,
                });
                tokio::task::yield_now().await;
            }
            mine
        }));
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.await.expect("producer task"));
    }
    all.sort_by_key(|f| f.lsn);
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn given_a_power_cut_at_random_instants_under_concurrent_appends_then_every_acked_frame_survives_and_nothing_else_appears(
) {
    for round in 0..20u64 {
        let dir = tempfile::tempdir().expect("tempdir");
        let (wal, fs) = open_faulty(dir.path());
        let appending = {
            let wal = wal.clone();
            tokio::spawn(async move { producers(&wal, 8, 400).await })
        };
        // Cut after a varying number of syncs.
        let target = 3 + round * 7;
        while fs.syncs() < target && !appending.is_finished() {
            tokio::task::yield_now().await;
        }
        let acked_at_cut = wal.durable_lsn();
        fs.power_cut().expect("power cut");
        let appended = appending.await.expect("producers");
        drop(wal);

        let (wal, recovered) = reopen_strict(dir.path());
        assert!(
            recovered.end_lsn >= acked_at_cut,
            "round {round}: acked up to {acked_at_cut}, recovered only to {}",
            recovered.end_lsn
        );
        let read = read_all(&wal, 0);
        assert_eq!(
            read[..],
            appended[..read.len()],
            "round {round}: the log is a prefix of what was appended"
        );
        assert_eq!(read.last().map_or(0, |f| f.end_lsn), recovered.end_lsn);
    }
}
