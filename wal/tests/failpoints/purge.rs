//! Purged segments leave the log at once and give their blocks back in steps; a power cut
//! while they do loses no frame that is still in the log.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_wal::env::FaultyFileSystem;
use sluice_wal::{Frame, RecoveryMode, Wal, WalOptions};

use crate::common::{append, base_lsn, read_all, segment_files, FRAME_HEADER_LEN};

const MIB: u64 = 1 << 20;

/// A log with 5 MiB segments (more than two shrink steps each) on a fresh faulty file system,
/// holding twelve 1 MiB frames, its two oldest segments just purged. Returns the frames and
/// the purge's LSN (the third segment's base).
async fn purged_log(dir: &Path) -> (Wal, FaultyFileSystem, Vec<Frame>, u64) {
    let fs = FaultyFileSystem::new();
    let (wal, _) = Wal::open_with_fs(options(dir), Arc::new(fs.clone())).expect("open");
    let frames = megabyte_frames(&wal, 12).await;
    let before = segment_files(dir);
    assert!(before.len() >= 3, "{before:?}");
    let cut = base_lsn(&before[2]);
    assert_eq!(wal.purge_below(cut).expect("purge"), 2);
    assert_eq!(segment_files(dir), before[2..]);
    (wal, fs, frames, cut)
}

fn options(dir: &Path) -> WalOptions {
    let mut opts = crate::common::options(dir);
    opts.segment_bytes = 5 * MIB;
    opts.recovery = RecoveryMode::AbsoluteConsistency;
    opts
}

/// Appends `n` frames of 1 MiB each and waits until they are durable.
async fn megabyte_frames(wal: &Wal, n: usize) -> Vec<Frame> {
    let mut frames = Vec::new();
    for i in 0..n {
        let payload = vec![i as u8; MIB as usize];
        let end_lsn = append(wal, 1, payload.clone()).await;
        frames.push(Frame {
            lsn: end_lsn - FRAME_HEADER_LEN - MIB,
            end_lsn,
            kind: 1,
            payload,
        });
    }
    let last = frames.last().map_or(0, |f| f.end_lsn);
    wal.wait_durable(last).await.expect("durable");
    frames
}

/// Files of `dir` whose name is neither a segment's nor the log's own.
fn strays(dir: &Path) -> Vec<PathBuf> {
    let segments = segment_files(dir);
    std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| !segments.contains(p))
        .filter(|p| {
            !matches!(
                p.file_name().and_then(|n| n.to_str()),
                Some("wal-id" | "LOCK")
            )
        })
        .collect()
}

#[tokio::test]
async fn a_purged_segment_leaves_the_log_at_once_and_is_shrunk_in_2_mib_steps_before_it_goes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, fs, frames, cut) = purged_log(dir.path()).await;
    let kept: Vec<_> = frames.iter().filter(|f| f.lsn >= cut).cloned().collect();
    assert_eq!(read_all(&wal, 0), kept);
    wal.close().expect("close");

    // Both 5 MiB files went 5 → 3 → 1 MiB, then were removed; nothing retired is left.
    assert_eq!(fs.shrinks(), vec![3 * MIB, MIB, 3 * MIB, MIB]);
    assert_eq!(strays(dir.path()), Vec::<PathBuf>::new());
}

#[tokio::test]
async fn a_power_cut_while_purged_segments_shrink_loses_no_kept_frame_and_reopen_removes_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, fs, frames, cut) = purged_log(dir.path()).await;
    // The cut catches the reaper before it began, between steps (its next one fails and
    // the file comes back whole, as last synced) or, on a slow machine, done.
    fs.power_cut().expect("power cut");
    drop(wal);

    let (wal, recovered) = Wal::open(options(dir.path())).expect("reopen, strict");
    assert_eq!(recovered.start_lsn, cut);
    assert_eq!(recovered.end_lsn, frames[11].end_lsn);
    let kept: Vec<_> = frames.iter().filter(|f| f.lsn >= cut).cloned().collect();
    assert_eq!(read_all(&wal, 0), kept);
    assert_eq!(strays(dir.path()), Vec::<PathBuf>::new());
}
