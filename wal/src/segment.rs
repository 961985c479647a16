//! Segment files: their names, the listing of a directory, and the one segment the writer
//! appends to ([`ActiveSegment`]). Creating a segment is durable before anything is written
//! into it: preallocate (or adopt a zero-filled spare, see `spare`), write the header,
//! `fdatasync` the file, name it (create, or rename the spare), fsync the directory. So
//! recovery can rely on "a segment exists ⇒ every earlier segment was sealed and synced"
//! (the writer syncs a segment before it creates the next one).

use std::io::IoSlice;
use std::path::{Path, PathBuf};

use crate::env::{FileSystem, WritableFile};
use crate::error::Result;
use crate::format::{SegmentHeader, SEGMENT_HEADER_LEN};
use crate::fs;
use crate::lsn::Lsn;
use crate::spare::Spare;

/// File name extension of segments.
const EXTENSION: &str = ".wal";
/// Digits of the zero-padded base LSN in a segment's file name.
const NAME_DIGITS: usize = 20;

/// A segment known to exist: where it starts and where it lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SegmentMeta {
    pub base_lsn: Lsn,
    pub path: PathBuf,
}

/// `{dir}/{base_lsn:020}.wal`.
pub(crate) fn segment_path(dir: &Path, base_lsn: Lsn) -> PathBuf {
    dir.join(format!("{base_lsn:020}{EXTENSION}"))
}

/// The base LSN named by a segment file name, `None` for any other file.
pub(crate) fn parse_segment_name(name: &str) -> Option<Lsn> {
    let digits = name.strip_suffix(EXTENSION)?;
    if digits.len() != NAME_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The segments in `dir`, in base LSN order.
pub(crate) fn list_segments(env: &dyn FileSystem, dir: &Path) -> Result<Vec<SegmentMeta>> {
    let mut segments: Vec<SegmentMeta> = fs::list_dir(env, dir)?
        .into_iter()
        .filter_map(|path| {
            let base_lsn = parse_segment_name(path.file_name()?.to_str()?)?;
            Some(SegmentMeta { base_lsn, path })
        })
        .collect();
    segments.sort_by_key(|s| s.base_lsn);
    Ok(segments)
}

/// The segment the writer appends to. Only the writer thread holds one.
pub(crate) struct ActiveSegment {
    file: Box<dyn WritableFile>,
    meta: SegmentMeta,
    /// LSN just past the last byte this file can hold.
    limit_lsn: Lsn,
    /// LSN the next write lands at (the file's write position, in LSN terms).
    next_lsn: Lsn,
}

impl ActiveSegment {
    /// Creates `{dir}/{base_lsn:020}.wal` (replacing a file of that name), sized to
    /// `segment_bytes` or to hold `first_frame_bytes`, whichever is larger, and makes it
    /// durable. A half-created file is removed again.
    pub(crate) fn create(
        env: &dyn FileSystem,
        dir: &Path,
        segment_id: u64,
        base_lsn: Lsn,
        segment_bytes: u64,
        first_frame_bytes: u64,
    ) -> Result<Self> {
        let path = segment_path(dir, base_lsn);
        let file_len = segment_bytes.max(SEGMENT_HEADER_LEN as u64 + first_frame_bytes);
        let file = fs::create_preallocated(env, &path, file_len).inspect_err(|_| {
            if let Err(cleanup) = fs::remove_file(env, &path) {
                tracing::warn!(error = %cleanup, "could not remove half-created segment");
            }
        })?;
        let segment = Self::install(env, dir, file, &path, segment_id, base_lsn, file_len)?;
        tracing::debug!(path = %segment.meta.path.display(), segment_id, base_lsn, file_len, "created segment");
        Ok(segment)
    }

    /// Turns the prepared `spare` into the segment `{dir}/{base_lsn:020}.wal` (replacing a
    /// file of that name). On error the file is removed again and the caller creates the
    /// segment instead.
    pub(crate) fn adopt(
        env: &dyn FileSystem,
        dir: &Path,
        spare: Spare,
        segment_id: u64,
        base_lsn: Lsn,
    ) -> Result<Self> {
        let Spare { file, path, len } = spare;
        let segment = Self::install(env, dir, file, &path, segment_id, base_lsn, len)?;
        tracing::debug!(path = %segment.meta.path.display(), segment_id, base_lsn, len, "adopted a prepared segment");
        Ok(segment)
    }

    /// Makes `file` (now at `file_path`, `len` bytes) the durable segment starting at
    /// `base_lsn`: header, `fdatasync`, rename to the segment's name if it has another one,
    /// directory fsync. On error the file is removed under whichever name it has.
    fn install(
        env: &dyn FileSystem,
        dir: &Path,
        mut file: Box<dyn WritableFile>,
        file_path: &Path,
        segment_id: u64,
        base_lsn: Lsn,
        len: u64,
    ) -> Result<Self> {
        let path = segment_path(dir, base_lsn);
        let header = SegmentHeader {
            segment_id,
            base_lsn,
        }
        .encode();
        let mut named = file_path == path;
        let installed = fs::write_all_at(file.as_mut(), &mut [IoSlice::new(&header)], 0, file_path)
            .and_then(|()| fs::sync_data(file.as_mut(), file_path))
            .and_then(|()| {
                if !named {
                    fs::rename(env, file_path, &path)?;
                    named = true;
                }
                fs::sync_dir(env, dir)
            });
        if let Err(e) = installed {
            drop(file);
            let leftover = if named { path.as_path() } else { file_path };
            if let Err(cleanup) = fs::remove_file(env, leftover) {
                tracing::warn!(error = %cleanup, "could not remove a half-made segment");
            }
            return Err(e);
        }
        Ok(ActiveSegment {
            file,
            meta: SegmentMeta { base_lsn, path },
            limit_lsn: base_lsn + (len - SEGMENT_HEADER_LEN as u64),
            next_lsn: base_lsn,
        })
    }

    /// Bytes of LSN space this segment holds.
    pub(crate) fn capacity(&self) -> u64 {
        self.limit_lsn - self.meta.base_lsn
    }

    /// Bytes of LSN space written so far.
    pub(crate) fn used(&self) -> u64 {
        self.next_lsn - self.meta.base_lsn
    }

    pub(crate) fn meta(&self) -> &SegmentMeta {
        &self.meta
    }

    /// Whether a frame ending at `end_lsn` fits in this segment.
    pub(crate) fn fits(&self, end_lsn: Lsn) -> bool {
        end_lsn <= self.limit_lsn
    }

    /// Writes frames that start at [`ActiveSegment::next_lsn`] and end at `end_lsn`. On
    /// error nothing counts as written: a retry rewrites the same bytes at the same offset.
    pub(crate) fn write(&mut self, bufs: &mut [IoSlice<'_>], end_lsn: Lsn) -> Result<()> {
        debug_assert!(self.fits(end_lsn));
        let offset = SEGMENT_HEADER_LEN as u64 + (self.next_lsn - self.meta.base_lsn);
        fs::write_all_at(self.file.as_mut(), bufs, offset, &self.meta.path)?;
        self.next_lsn = end_lsn;
        Ok(())
    }

    /// LSN the next frame written here starts at.
    pub(crate) fn next_lsn(&self) -> Lsn {
        self.next_lsn
    }

    /// Whether this segment is written through `O_DIRECT`.
    pub(crate) fn is_direct(&self) -> bool {
        self.file.is_direct()
    }

    pub(crate) fn sync(&mut self) -> Result<()> {
        fs::sync_data(self.file.as_mut(), &self.meta.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_carry_the_zero_padded_base_lsn() {
        let p = segment_path(Path::new("/x"), 4096);
        assert_eq!(p, Path::new("/x/00000000000000004096.wal"));
        assert_eq!(parse_segment_name("00000000000000004096.wal"), Some(4096));
        assert_eq!(parse_segment_name("4096.wal"), None);
        assert_eq!(parse_segment_name("0000000000000000409x.wal"), None);
        assert_eq!(parse_segment_name("wal-id"), None);
    }
}
