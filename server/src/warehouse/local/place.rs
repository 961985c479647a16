//! Giving a put's bytes their name only once they are durable.
//!
//! object_store's `LocalFileSystem` writes a put to a staging file and renames it into place
//! (or, for a create-if-absent put, hard-links it), with no fsync in between. A sync after
//! the put returns comes too late for a power cut in between: a journaling file system with
//! delayed allocation (ext4, XFS) commits the new name within seconds while the file's data
//! blocks are not even allocated, so the file comes back empty. An empty Delta commit file
//! is a version that does not load. [`place`] writes the bytes to a staging file beside the
//! target (`{name}#9{digits}`, a name `LocalFileSystem`'s listings skip), syncs it, and only
//! then gives it the target's name: renamed over it ([`Placement::Replace`]) or linked if
//! there is none ([`Placement::IfAbsent`]: a Delta commit, whose `AlreadyExists` is how
//! deltalake learns that another writer took the version). The caller then syncs the
//! folders, which makes the name durable. Any failure removes the staging file and leaves
//! the target as it was.

use std::io::{self, Write};
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use object_store::PutPayload;

/// How the synced staging file takes the target's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Placement {
    /// Renamed over whatever the target holds (`PutMode::Overwrite`).
    Replace,
    /// Linked as the target only if there is none (`PutMode::Create`).
    IfAbsent,
}

/// Why nothing was placed; the target is as it was.
#[derive(Debug)]
pub(super) enum PlaceError {
    /// Creating or writing the staging file failed.
    Write(io::Error),
    /// Its sync failed: its bytes may not be on the disk, and a second sync of the same
    /// pages proves nothing (write them anew).
    Sync(io::Error),
    /// The target exists ([`Placement::IfAbsent`]).
    Exists(io::Error),
    /// The rename or link failed.
    Place(io::Error),
}

impl PlaceError {
    /// The object_store error for a put of `file` that failed so.
    pub(super) fn into_store_error(self, file: &FsPath) -> object_store::Error {
        let path = file.display();
        let generic = |what: String| object_store::Error::Generic {
            store: "DurableLocal",
            source: what.into(),
        };
        match self {
            PlaceError::Exists(source) => object_store::Error::AlreadyExists {
                path: path.to_string(),
                source: Box::new(source),
            },
            PlaceError::Write(e) => generic(format!("writing {path}: {e}")),
            PlaceError::Sync(e) => generic(format!("fsync {path}: {e}")),
            PlaceError::Place(e) => generic(format!("placing {path}: {e}")),
        }
    }
}

/// A name beside `file` that listings skip (`{name}#{digits}`) and no other writer uses.
pub(super) fn staging(file: &FsPath) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut name = file.as_os_str().to_owned();
    name.push(format!("#9{}{nanos:09}{n}", std::process::id()));
    PathBuf::from(name)
}

/// Writes `bytes` to a new file beside `file` (creating missing folders), makes it durable
/// with `sync`, then gives it `file`'s name by `placement` (the caller syncs the folders).
/// Returns the written file's metadata. On any failure the new file is removed.
pub(super) fn place(
    file: &FsPath,
    bytes: &PutPayload,
    placement: Placement,
    sync: &dyn Fn(&FsPath) -> io::Result<()>,
) -> Result<std::fs::Metadata, PlaceError> {
    let fresh = staging(file);
    let outcome = (|| {
        let mut out = create_new(&fresh).map_err(PlaceError::Write)?;
        for chunk in bytes.iter() {
            out.write_all(chunk).map_err(PlaceError::Write)?;
        }
        let metadata = out.metadata().map_err(PlaceError::Write)?;
        drop(out);
        sync(&fresh).map_err(PlaceError::Sync)?;
        match placement {
            Placement::Replace => std::fs::rename(&fresh, file).map_err(PlaceError::Place)?,
            Placement::IfAbsent => {
                std::fs::hard_link(&fresh, file).map_err(|e| match e.kind() {
                    io::ErrorKind::AlreadyExists => PlaceError::Exists(e),
                    _ => PlaceError::Place(e),
                })?;
                // The data is durable under `file` now; the staging name is only a second
                // link (if its removal is lost, listings skip it).
                let _ = std::fs::remove_file(&fresh);
            }
        }
        Ok(metadata)
    })();
    if outcome.is_err() {
        let _ = std::fs::remove_file(&fresh);
    }
    outcome
}

/// `File::create_new`, creating the missing folders first if the parent is not there.
fn create_new(path: &FsPath) -> io::Result<std::fs::File> {
    match std::fs::File::create_new(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::File::create_new(path)
        }
        other => other,
    }
}

/// The e-tag `LocalFileSystem` gives a file (inode, modification time in µs, size, in hex),
/// so a put answers what a later `head` of the same file says.
pub(super) fn e_tag(metadata: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    let micros = metadata
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .unwrap_or_default()
        .as_micros();
    format!("{:x}-{micros:x}-{:x}", metadata.ino(), metadata.len())
}

#[cfg(test)]
mod tests {
    use super::super::fsync;
    use super::super::tests::names;
    use super::*;

    /// Places `rows` at `file` with real syncs.
    fn place_rows(file: &FsPath) -> std::fs::Metadata {
        place(
            file,
            &PutPayload::from_static(b"rows"),
            Placement::Replace,
            &fsync,
        )
        .expect("placed")
    }

    #[test]
    fn the_bytes_are_synced_before_the_name_exists() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("00000000000000000001.json");
        let bytes: PutPayload = [
            bytes::Bytes::from_static(b"{\"a\""),
            bytes::Bytes::from_static(b":1}"),
        ]
        .into_iter()
        .collect();
        for placement in [Placement::IfAbsent, Placement::Replace] {
            let _ = std::fs::remove_file(&file);
            let target = file.clone();
            let synced = std::sync::Mutex::new(Vec::new());
            place(&file, &bytes, placement, &|p| {
                // At the sync the target has no name yet, and the file synced holds the bytes.
                assert!(!target.exists(), "{placement:?}: named before its sync");
                assert_eq!(std::fs::read(p)?, b"{\"a\":1}");
                synced.lock().expect("log").push(p.to_path_buf());
                fsync(p)
            })
            .expect("placed");
            assert_eq!(std::fs::read(&file).expect("read"), b"{\"a\":1}");
            let synced = synced.into_inner().expect("log");
            assert_eq!(synced.len(), 1, "{synced:?}");
            assert_ne!(synced[0], file, "a staging file is synced");
            assert_eq!(names(dir.path()), vec!["00000000000000000001.json"]);
        }
    }

    #[test]
    fn if_absent_leaves_an_existing_file_untouched_and_says_it_exists() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("00000000000000000001.json");
        std::fs::write(&file, b"theirs").expect("write");
        let err = place(
            &file,
            &PutPayload::from_static(b"ours"),
            Placement::IfAbsent,
            &fsync,
        )
        .expect_err("exists");
        assert!(matches!(err, PlaceError::Exists(_)), "{err:?}");
        assert!(matches!(
            err.into_store_error(&file),
            object_store::Error::AlreadyExists { .. }
        ));
        assert_eq!(std::fs::read(&file).expect("read"), b"theirs");
        assert_eq!(names(dir.path()), vec!["00000000000000000001.json"]);
    }

    #[test]
    fn a_failed_sync_places_nothing_and_leaves_no_staging_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("00000000000000000001.json");
        std::fs::write(&file, b"before").expect("write");
        for placement in [Placement::IfAbsent, Placement::Replace] {
            let err = place(
                &file,
                &PutPayload::from_static(b"other"),
                placement,
                &|_| Err(io::Error::from_raw_os_error(5)),
            )
            .expect_err("the sync fails");
            match err {
                PlaceError::Sync(e) => assert_eq!(e.raw_os_error(), Some(5)),
                other => panic!("{other:?}"),
            }
            assert_eq!(std::fs::read(&file).expect("read"), b"before");
            assert_eq!(names(dir.path()), vec!["00000000000000000001.json"]);
        }
        let gone = dir.path().join("new.json");
        let _ = place(
            &gone,
            &PutPayload::from_static(b"x"),
            Placement::IfAbsent,
            &|_| Err(io::Error::from_raw_os_error(5)),
        );
        assert!(!gone.exists(), "no name for bytes that are not durable");
    }

    #[test]
    fn missing_folders_are_made() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("a").join("b").join("part.parquet");
        place_rows(&file);
        assert_eq!(std::fs::read(&file).expect("read"), b"rows");
    }

    #[test]
    fn staging_names_are_hidden_from_listings_and_distinct() {
        let file = FsPath::new("/w/t/_delta_log/00000000000000000001.json");
        let (a, b) = (staging(file), staging(file));
        assert_ne!(a, b);
        let name = a.file_name().and_then(|n| n.to_str()).expect("name");
        let (_, suffix) = name.split_once('#').expect("a # suffix");
        assert!(
            !suffix.is_empty() && suffix.bytes().all(|c| c.is_ascii_digit()),
            "{name}"
        );
    }

    #[test]
    fn the_e_tag_is_the_one_a_head_gives() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("part.parquet");
        let metadata = place_rows(&file);
        let store = object_store::local::LocalFileSystem::new();
        let location = object_store::path::Path::from_absolute_path(&file).expect("path");
        let head =
            futures::executor::block_on(object_store::ObjectStoreExt::head(&store, &location))
                .expect("head");
        assert_eq!(head.e_tag, Some(e_tag(&metadata)));
    }
}
