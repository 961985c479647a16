//! The WAL reader on arbitrary segment bytes: the input (after one byte
//! choosing the recovery mode) becomes the only segment file of a WAL
//! directory; opening it must answer Ok or a typed error, never panic, and an
//! opened log must read back and close cleanly.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sluice_wal::{RecoveryMode, Wal, WalOptions};

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| std::env::temp_dir().join(format!("sluice-wal-fuzz-{}", std::process::id())))
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, segment)) = data.split_first() else {
        return;
    };
    let dir = dir();
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("fuzz dir");
    std::fs::write(dir.join("wal-id"), "fuzz").expect("wal-id");
    std::fs::write(dir.join(format!("{:020}.wal", 0)), segment).expect("segment");
    let mut opts = WalOptions::new(dir);
    opts.segment_bytes = 64 * 1024;
    opts.recovery = if mode & 1 == 0 {
        RecoveryMode::TolerateTailCorruption
    } else {
        RecoveryMode::AbsoluteConsistency
    };
    if let Ok((wal, recovered)) = Wal::open(opts) {
        let mut end = 0;
        if let Ok(frames) = wal.read_from(0) {
            for frame in frames.flatten() {
                assert!(frame.end_lsn > frame.lsn, "frames advance");
                end = frame.end_lsn;
            }
        }
        assert!(end <= recovered.end_lsn, "no frame past the recovered end");
        let _ = wal.close();
    }
});
