//! The data directory is private to the server's user: after a start on a fresh directory
//! the directory and its `wal` folder are 0700 and every file in them (the catalog, the
//! WAL segments, `wal-id`, `LOCK`, `secrets.key`) 0600; a restart on a loosened directory sets them back
//! and says so in the log (`sluice doctor`'s row for loose modes is tested in `doctor.rs`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::harness::Server;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Every regular file directly in the data dir and its `wal` folder.
fn files(data: &Path) -> Vec<PathBuf> {
    [data.to_path_buf(), data.join("wal")]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).expect("list"))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_file())
        .collect()
}

fn assert_private(data: &Path) {
    assert_eq!(mode(data), 0o700, "{}", data.display());
    assert_eq!(mode(&data.join("wal")), 0o700);
    let files = files(data);
    for name in ["catalog.json", "wal/wal-id", "wal/LOCK"] {
        assert!(files.contains(&data.join(name)), "{name} in {files:?}");
    }
    let segments = files
        .iter()
        .filter(|f| f.to_string_lossy().contains("wal/0000"))
        .count();
    assert!(segments > 0, "no WAL segment in {files:?}");
    for file in files {
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fresh_data_dir_is_private_and_a_loosened_one_is_fixed_at_restart_with_a_warning() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let mut server = Server::start(&data, "200ms").await;
    server.create_table("m.s.t", "id BIGINT");
    assert_private(&data);
    let first = server.log_without_panic();
    assert!(
        !first.contains("catalog.json is 0") && !first.contains("wal-id is 0"),
        "a fresh directory had loose files:\n{first}"
    );
    server.terminate();

    chmod(&data, 0o755);
    chmod(&data.join("wal"), 0o755);
    chmod(&data.join("catalog.json"), 0o644);
    chmod(&data.join("wal").join("wal-id"), 0o644);
    server.restart().await;
    assert_private(&data);
    let log = server.log_without_panic();
    for what in ["catalog.json is 0644", "wal-id is 0644", "wal is 0755"] {
        assert!(
            log.contains(what) && log.contains("set to 06") && log.contains("set to 0700"),
            "no warning for {what}:\n{log}"
        );
    }
    server.terminate();
}
