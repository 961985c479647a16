//! Prepared (zero-filled) segments: rotations adopt them, the data reads back across them and
//! after a reopen in the strictest recovery mode, an unused spare never outlives the log, a
//! leftover spare is removed at open, and a preparer that cannot prepare never fails an
//! append.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sluice_wal::{RecoveryMode, Wal};

use crate::common::{append_many, read_all, segment_files, small_segments};
use crate::hooked_fs::{FsHooks, Hooked};

/// Small segments with prepared segments on.
fn prepared(dir: &Path) -> sluice_wal::WalOptions {
    let mut opts = small_segments(dir);
    opts.prepare_segments = true;
    opts
}

/// The real file system, recording renames and optionally refusing to create spares.
#[derive(Clone, Default)]
struct RecordingFs {
    renames: Arc<Mutex<Vec<(PathBuf, PathBuf)>>>,
    refuse_spares: bool,
}

fn is_spare(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("prepared-") && n.ends_with(".tmp"))
}

impl RecordingFs {
    fn renames(&self) -> Vec<(PathBuf, PathBuf)> {
        self.renames.lock().expect("renames").clone()
    }
}

impl FsHooks for RecordingFs {
    fn before_create(&self, path: &Path) -> io::Result<()> {
        if self.refuse_spares && is_spare(path) {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(())
    }

    fn after_rename(&self, from: &Path, to: &Path) {
        self.renames
            .lock()
            .expect("renames")
            .push((from.to_path_buf(), to.to_path_buf()));
    }
}

fn spares_in(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("list dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| is_spare(p))
        .collect()
}

/// Appends in rounds, each waited until durable, so the preparer has time between them.
async fn append_rounds(wal: &Wal, rounds: usize) -> Vec<sluice_wal::Frame> {
    let mut frames = Vec::new();
    for round in 0..rounds {
        frames.extend(append_many(wal, round * 20..(round + 1) * 20).await);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    frames
}

#[tokio::test]
async fn given_rotations_then_prepared_segments_are_adopted_and_every_frame_reads_back_in_absolute_mode(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = RecordingFs::default();
    let (wal, _) =
        Wal::open_with_fs(prepared(dir.path()), Arc::new(Hooked(fs.clone()))).expect("open");
    let frames = append_rounds(&wal, 30).await;
    let renames = fs.renames();
    assert!(
        renames.len() >= 3,
        "expected prepared segments to be adopted, got {} renames over {} segments",
        renames.len(),
        segment_files(dir.path()).len()
    );
    for (from, to) in &renames {
        assert!(is_spare(from), "renamed from {}", from.display());
        assert!(
            segment_files(dir.path()).contains(to),
            "{} is a segment",
            to.display()
        );
        assert_eq!(std::fs::metadata(to).expect("metadata").len(), 4096);
    }
    assert_eq!(read_all(&wal, 0), frames);
    wal.close().expect("close");
    assert_eq!(
        spares_in(dir.path()),
        Vec::<PathBuf>::new(),
        "close removes the unused spare"
    );

    let mut strict = prepared(dir.path());
    strict.recovery = RecoveryMode::AbsoluteConsistency;
    let (wal, recovered) = Wal::open(strict).expect("reopen in absolute mode");
    assert_eq!(recovered.truncated_bytes, 0);
    assert_eq!(recovered.end_lsn, frames.last().expect("frames").end_lsn);
    assert_eq!(read_all(&wal, 0), frames);
}

#[tokio::test]
async fn given_a_spare_left_by_a_crash_when_the_log_opens_then_it_is_removed_and_ignored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = Wal::open(prepared(dir.path())).expect("open");
    let frames = append_many(&wal, 0..50).await;
    wal.close().expect("close");
    let leftover = dir.path().join("prepared-7.tmp");
    std::fs::write(&leftover, [0x55u8; 1000]).expect("write a leftover spare");

    let (wal, recovered) = Wal::open(prepared(dir.path())).expect("reopen");
    assert!(!leftover.exists(), "the leftover spare is removed at open");
    assert_eq!(recovered.end_lsn, frames.last().expect("frames").end_lsn);
    assert_eq!(read_all(&wal, 0), frames);
}

#[tokio::test]
async fn given_a_preparer_that_cannot_create_spares_then_rotation_creates_segments_and_nothing_fails(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = RecordingFs {
        refuse_spares: true,
        ..RecordingFs::default()
    };
    let (wal, _) =
        Wal::open_with_fs(prepared(dir.path()), Arc::new(Hooked(fs.clone()))).expect("open");
    let frames = append_rounds(&wal, 20).await;
    assert!(segment_files(dir.path()).len() > 3, "the log rotated");
    assert!(fs.renames().is_empty(), "no spare was ever adopted");
    assert_eq!(read_all(&wal, 0), frames);
    assert_eq!(wal.durable_lsn(), frames.last().expect("frames").end_lsn);
    wal.close().expect("close");
    assert!(spares_in(dir.path()).is_empty());
}
