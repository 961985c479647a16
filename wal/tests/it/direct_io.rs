//! Segments written through `O_DIRECT` (`WalOptions::direct_io`): the active segment really
//! is open with the flag, frames of every length read back across rotations and prepared
//! segments, and a reopen in the strictest recovery mode finds exactly what was acked; the
//! probe `sluice doctor` runs says whether a directory takes the flag.

use std::path::Path;

use sluice_wal::env::DirectFileSystem;
use sluice_wal::{RecoveryMode, Wal};

use crate::common::{append_many, read_all, small_segments};

/// The open-file flags (octal in `/proc/self/fdinfo`) of every segment of `dir` this
/// process holds open.
fn segment_open_flags(dir: &Path) -> Vec<u32> {
    let mut flags = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").expect("list /proc/self/fd") {
        let entry = entry.expect("fd entry");
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue; // closed meanwhile
        };
        if !(target.starts_with(dir) && target.extension().is_some_and(|e| e == "wal")) {
            continue;
        }
        let info_path = Path::new("/proc/self/fdinfo").join(entry.file_name());
        let Ok(info) = std::fs::read_to_string(info_path) else {
            continue;
        };
        let octal = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .expect("fdinfo has flags");
        flags.push(u32::from_str_radix(octal.trim(), 8).expect("octal flags"));
    }
    flags
}

/// Asserts that this process holds a segment of `dir` open, each with `O_DIRECT` exactly
/// if `direct`.
fn assert_segments_open(dir: &Path, direct: bool) {
    let flags = segment_open_flags(dir);
    assert!(!flags.is_empty(), "the active segment is open");
    for f in &flags {
        let has_flag = f & libc::O_DIRECT as u32 != 0;
        assert_eq!(has_flag, direct, "segment open flags {f:o}");
    }
}

#[tokio::test]
async fn given_direct_io_when_appending_across_rotations_then_the_segment_is_o_direct_and_everything_reads_back(
) {
    // On the target's disk: the system's temp directory may be a tmpfs that refuses O_DIRECT.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let mut opts = small_segments(dir.path());
    opts.direct_io = true;
    opts.prepare_segments = true;
    let (wal, _) = Wal::open(opts.clone()).expect("open");
    assert!(wal.direct_io(), "the log says its segment is O_DIRECT");
    let frames = append_many(&wal, 0..600).await;

    assert_segments_open(dir.path(), true);
    assert!(
        std::fs::read_dir(dir.path()).expect("list").count() > 5,
        "the frames span several segments"
    );
    assert_eq!(read_all(&wal, 0), frames);
    wal.close().expect("close");
    drop(wal);

    opts.recovery = RecoveryMode::AbsoluteConsistency;
    let (wal, recovered) = Wal::open(opts).expect("reopen strictly");
    assert_eq!(recovered.end_lsn, frames[599].end_lsn);
    assert_eq!(recovered.truncated_bytes, 0);
    assert_eq!(read_all(&wal, 0), frames);
}

#[test]
fn the_probe_says_direct_on_the_disk_leaves_nothing_and_names_a_missing_directory() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    assert!(DirectFileSystem::probe(dir.path()).expect("probe"));
    assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0);
    let missing = DirectFileSystem::probe(&dir.path().join("missing")).expect_err("no directory");
    assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
}

#[tokio::test]
async fn a_log_opened_buffered_says_so_and_its_segment_has_no_o_direct() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let mut opts = small_segments(dir.path());
    opts.direct_io = false;
    let (wal, _) = Wal::open(opts).expect("open");
    assert!(!wal.direct_io());
    assert_segments_open(dir.path(), false);
    wal.close().expect("close");
}
