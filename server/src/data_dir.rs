//! The data directory's privacy: it holds the WAL (every record before it reaches Delta),
//! the catalog, the admin credentials and key material, so the directory and its `wal`
//! folder are owner-only (0700) and every file directly in them owner read/write (0600).
//!
//! Modes are set when things are created (independent of the umask): [`create_private_dir`]
//! and [`write_private`] here, the WAL crate for its own files. A directory made by an older
//! version or by hand may be looser: [`loose_modes`] finds what is (for `sluice doctor`) and
//! [`tighten`] fixes it at start, with a warning per path.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub use sluice_wal::{DIR_MODE, FILE_MODE};

use crate::error::{Result, ServerError};

/// Sub-directory of the data directory holding the WAL.
pub const WAL_DIR: &str = "wal";

/// A path whose mode lets group or others in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loose {
    /// The directory or file.
    pub path: PathBuf,
    /// Its permission bits now.
    pub mode: u32,
    /// The permission bits it should have.
    pub wanted: u32,
}

impl std::fmt::Display for Loose {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is {:04o} (wanted {:04o})",
            self.path.display(),
            self.mode,
            self.wanted
        )
    }
}

/// Creates `dir` (and missing parents) with mode [`DIR_MODE`]; an existing one is kept.
pub fn create_private_dir(dir: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
        .map_err(|e| ServerError::io(format!("creating {}", dir.display()), e))
}

/// Writes `bytes` to `path` (created with mode [`FILE_MODE`], or truncated) and syncs it.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .open(path)
        .map_err(|e| ServerError::io(format!("creating {}", path.display()), e))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| ServerError::io(format!("writing {}", path.display()), e))
}

/// Every path of `data_dir` looser than it should be: the directory itself, its `wal`
/// folder, and the regular files directly in either (symbolic links and other folders,
/// such as a local warehouse, are left alone). A missing directory has nothing loose.
pub fn loose_modes(data_dir: &Path) -> Result<Vec<Loose>> {
    let mut loose = Vec::new();
    for dir in [data_dir.to_path_buf(), data_dir.join(WAL_DIR)] {
        let meta = match std::fs::metadata(&dir) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(ServerError::io(format!("checking {}", dir.display()), e)),
        };
        check(&mut loose, &dir, meta.permissions().mode(), DIR_MODE);
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| ServerError::io(format!("listing {}", dir.display()), e))?;
        for entry in entries {
            let entry =
                entry.map_err(|e| ServerError::io(format!("listing {}", dir.display()), e))?;
            let meta = entry
                .metadata()
                .map_err(|e| ServerError::io(format!("checking {}", entry.path().display()), e))?;
            if meta.is_file() {
                check(
                    &mut loose,
                    &entry.path(),
                    meta.permissions().mode(),
                    FILE_MODE,
                );
            }
        }
    }
    Ok(loose)
}

fn check(loose: &mut Vec<Loose>, path: &Path, mode: u32, wanted: u32) {
    if mode & 0o077 != 0 {
        loose.push(Loose {
            path: path.to_path_buf(),
            mode: mode & 0o7777,
            wanted,
        });
    }
}

/// Creates `data_dir` owner-only if missing, and sets every loose path of it to its wanted
/// mode with a warning. A path that cannot be changed (another owner, e.g. a volume root
/// on Kubernetes with `fsGroup`) is a warning too, not a failure. Returns what was loose.
pub fn tighten(data_dir: &Path) -> Result<Vec<Loose>> {
    create_private_dir(data_dir)?;
    let loose = loose_modes(data_dir)?;
    for l in &loose {
        match std::fs::set_permissions(&l.path, std::fs::Permissions::from_mode(l.wanted)) {
            Ok(()) => tracing::warn!(
                path = %l.path.display(),
                "{l}: readable beyond the server's user; set to {:04o}",
                l.wanted
            ),
            Err(e) => tracing::warn!(
                path = %l.path.display(),
                "{l}: readable beyond the server's user and cannot be changed: {e}"
            ),
        }
    }
    Ok(loose)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).expect("stat").permissions().mode() & 0o777
    }

    #[test]
    fn a_fresh_dir_and_its_files_are_private_and_a_loosened_one_is_tightened() {
        let root = tempfile::tempdir().expect("tempdir");
        let data = root.path().join("data");
        create_private_dir(&data).expect("create");
        write_private(&data.join("catalog.json"), b"{}").expect("write");
        assert_eq!(mode(&data), DIR_MODE);
        assert_eq!(mode(&data.join("catalog.json")), FILE_MODE);
        assert_eq!(loose_modes(&data).expect("check"), Vec::new());

        let wal = data.join(WAL_DIR);
        std::fs::create_dir(&wal).expect("wal dir");
        std::fs::write(wal.join("wal-id"), b"x\n").expect("id");
        std::fs::create_dir(data.join("warehouse")).expect("warehouse");
        for (path, m) in [
            (&data, 0o755),
            (&wal, 0o750),
            (&wal.join("wal-id"), 0o644),
            (&data.join("catalog.json"), 0o604),
            (&data.join("warehouse"), 0o755),
        ] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(m)).expect("chmod");
        }
        let loose = loose_modes(&data).expect("check");
        let paths: Vec<&Path> = loose.iter().map(|l| l.path.as_path()).collect();
        assert_eq!(paths.len(), 4, "{loose:?}");
        assert!(!paths.contains(&data.join("warehouse").as_path()));
        assert_eq!(tighten(&data).expect("tighten").len(), 4);
        assert_eq!(mode(&data), DIR_MODE);
        assert_eq!(mode(&wal), DIR_MODE);
        assert_eq!(mode(&wal.join("wal-id")), FILE_MODE);
        assert_eq!(mode(&data.join("catalog.json")), FILE_MODE);
        assert!(loose_modes(&data).expect("recheck").is_empty());
    }
}
