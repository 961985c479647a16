//! The log is private to its owner: its directory (and parents it creates) is 0700 and every
//! file in it (segments, prepared spares, `wal-id`, `LOCK`) 0600, set at creation.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sluice_wal::{DIR_MODE, FILE_MODE};

use crate::common::{append_many, small_segments};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

#[tokio::test]
async fn a_new_log_creates_its_directory_0700_and_every_file_0600() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("data").join("wal");
    let mut opts = small_segments(&dir);
    opts.prepare_segments = true;
    let (wal, _) = sluice_wal::Wal::open(opts).expect("open");
    append_many(&wal, 0..200).await;
    assert_eq!(mode(&dir), DIR_MODE);
    assert_eq!(mode(&root.path().join("data")), DIR_MODE);
    let files: Vec<_> = std::fs::read_dir(&dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .collect();
    let names: Vec<String> = files
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    assert!(names.iter().any(|n| n == "wal-id"), "{names:?}");
    assert!(names.iter().any(|n| n == "LOCK"), "{names:?}");
    assert!(names.len() >= 4, "segments were created: {names:?}");
    for file in &files {
        assert_eq!(mode(file), FILE_MODE, "{}", file.display());
    }
    wal.close().expect("close");
}
