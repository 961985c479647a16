//! [`DirectFileSystem`]: the real file system with segments written through `O_DIRECT`
//! (`WalOptions::direct_io`), so frames go from the writer's buffer to the device without
//! a copy into the page cache, the writeback that `fdatasync` would start, or the freeing
//! of those pages when a retired segment is cut.
//!
//! `O_DIRECT` wants the file offset, the length and the memory address of every write
//! aligned to the device's logical block size; [`DIRECT_ALIGN`] (4 KiB) satisfies every
//! common one. The log writes frames of any length at its end, so [`DirectFile`] stages
//! each write in an aligned buffer:
//!
//! ```text
//!   block start        offset                       offset + len     next block boundary
//!   │ tail (kept) ─────│ the caller's bytes ──────────│ zeros ─────────│
//!   └──────────────────── one aligned pwrite ─────────────────────────┘
//! ```
//!
//! - the **tail**: the bytes of the last written block before the end of the last write,
//!   kept from that write (read back from the file when a write starts anywhere else);
//! - the **zeros** pad the last block. They land past the end of what the log wrote, where
//!   a segment holds zeros anyway (preallocated or zero-filled) and recovery stops;
//! - the next write rewrites that last block whole, with its new bytes after the tail.
//!
//! Where the file system refuses `O_DIRECT` (`EINVAL` at open; not seen on the host these
//! tests ran on, whose Linux 6.18 tmpfs takes the flag too), the segment is an ordinary
//! buffered file. Where a write is refused with `EINVAL` (a file system that opens with the
//! flag but cannot honour it), the file turns the flag off and writes buffered from then on,
//! logging it once. Reads (recovery) stay buffered: the kernel keeps them coherent with
//! direct writes.

use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice};
use std::path::Path;

use super::default::DefaultFileSystem;
use super::file::{FileSystem, WritableFile};
use super::os;

/// Alignment of offset, length and buffer address of every direct write.
pub const DIRECT_ALIGN: usize = 4096;

/// Size of a direct file's staging buffer, allocated once: a longer write is written a
/// stage at a time, as short writes the caller's loop continues.
const STAGE_BYTES: usize = 1 << 20;

/// The operating system's file system, with segments opened `O_DIRECT` where it allows.
#[derive(Clone, Copy, Debug, Default)]
pub struct DirectFileSystem;

impl DirectFileSystem {
    /// Whether segments in `dir` would be written `O_DIRECT`: opens a probe file there with
    /// the flag, writes an unaligned record through the staging path and syncs it, then
    /// removes the file. `false` where the file system refuses the flag at open or at the
    /// write (segments there are buffered); an error for anything else.
    pub fn probe(dir: &Path) -> io::Result<bool> {
        let path = dir.join(format!(".direct-io-probe-{}", std::process::id()));
        let probed = Self::probe_at(&path);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound && probed.is_ok() => Err(e),
            _ => probed,
        }
    }

    fn probe_at(path: &Path) -> io::Result<bool> {
        let file = match open_direct(path) {
            Ok(file) => file,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Ok(false),
            Err(e) => return Err(e),
        };
        let mut file = DirectFile::new(file);
        let record = [0x5au8; 2300];
        let mut written = 0;
        while written < record.len() {
            let n = file.write_vectored_at(&[IoSlice::new(&record[written..])], written as u64)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "probe write wrote nothing",
                ));
            }
            written += n;
        }
        file.sync_data()?;
        Ok(file.direct)
    }
}

#[cfg(target_os = "linux")]
fn open_direct(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = OpenOptions::new();
    options
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT);
    os::owner_only(&mut options);
    options.open(path)
}

#[cfg(not(target_os = "linux"))]
fn open_direct(_path: &Path) -> io::Result<File> {
    Err(io::Error::from_raw_os_error(libc::EINVAL))
}

/// The operating system's file system except for creating segments: opened `O_DIRECT`
/// where the file system allows ([`WritableFile::is_direct`] says which it got).
impl FileSystem for DirectFileSystem {
    fn create_preallocated(&self, path: &Path, len: u64) -> io::Result<Box<dyn WritableFile>> {
        match open_direct(path) {
            Ok(file) => {
                os::preallocate(&file, len)?;
                Ok(Box::new(DirectFile::new(file)))
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                tracing::debug!(path = %path.display(), "O_DIRECT refused at open: segment is buffered");
                DefaultFileSystem.create_preallocated(path, len)
            }
            Err(e) => Err(e),
        }
    }
}

/// A heap buffer whose usable part starts at a [`DIRECT_ALIGN`] boundary.
struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
}

impl AlignedBuf {
    fn new(capacity: usize) -> Self {
        let raw = vec![0u8; capacity + DIRECT_ALIGN];
        let start = raw.as_ptr().align_offset(DIRECT_ALIGN);
        AlignedBuf { raw, start }
    }

    fn capacity(&self) -> usize {
        self.raw.len() - DIRECT_ALIGN
    }

    fn as_mut(&mut self) -> &mut [u8] {
        let end = self.start + self.capacity();
        &mut self.raw[self.start..end]
    }
}

fn align_down(offset: u64) -> u64 {
    offset - offset % DIRECT_ALIGN as u64
}

fn align_up(len: usize) -> usize {
    len.div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN
}

/// A segment opened `O_DIRECT`: every write is staged into whole aligned blocks (see the
/// module docs).
struct DirectFile {
    file: File,
    stage: AlignedBuf,
    /// Start of the block the last write ended in, if its bytes before that end are the
    /// first `tail_len` bytes of `stage`; `None` when unknown (before the first write,
    /// after a failed one).
    tail_start: Option<u64>,
    tail_len: usize,
    /// False once a write was refused with `EINVAL`: buffered from then on.
    direct: bool,
}

impl DirectFile {
    fn new(file: File) -> Self {
        DirectFile {
            file,
            stage: AlignedBuf::new(STAGE_BYTES),
            tail_start: None,
            tail_len: 0,
            direct: true,
        }
    }

    /// Puts the bytes of the block at `block` that lie before `offset` at the front of the
    /// stage; returns how many.
    fn stage_prefix(&mut self, block: u64, offset: u64) -> io::Result<usize> {
        let prefix = (offset - block) as usize;
        if prefix == 0 {
            return Ok(0);
        }
        if self.tail_start == Some(block) && prefix <= self.tail_len {
            return Ok(prefix);
        }
        // Anywhere else (a retry behind the last write, a write past a gap): read the block.
        self.tail_start = None;
        let read = pread(&self.file, &mut self.stage.as_mut()[..DIRECT_ALIGN], block)?;
        // Past the file's end there is nothing to keep; the bytes are zeros.
        self.stage.as_mut()[read.min(prefix)..prefix].fill(0);
        Ok(prefix)
    }

    /// Writes as much of `bufs` as one stage holds; returns how many of their bytes.
    fn write_direct(&mut self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize> {
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        if len == 0 {
            return Ok(0);
        }
        let block = align_down(offset);
        let prefix = self.stage_prefix(block, offset)?;
        let take = len.min(STAGE_BYTES - prefix);
        let total = align_up(prefix + take);
        let stage = self.stage.as_mut();
        let mut at = prefix;
        for buf in bufs {
            let n = buf.len().min(prefix + take - at);
            stage[at..at + n].copy_from_slice(&buf[..n]);
            at += n;
        }
        stage[at..total].fill(0);
        let written = match pwrite(&self.file, &stage[..total], block) {
            Ok(n) => n,
            Err(e) => {
                self.tail_start = None;
                return Err(e);
            }
        };
        let accepted = written.saturating_sub(prefix).min(take);
        // Keep the block the accepted bytes end in: the next write starts there.
        let end = offset + accepted as u64;
        let tail_start = align_down(end);
        let from = (tail_start - block) as usize;
        let tail_len = (end - tail_start) as usize;
        stage.copy_within(from..from + tail_len, 0);
        self.tail_start = Some(tail_start);
        self.tail_len = tail_len;
        Ok(accepted)
    }

    /// Clears `O_DIRECT` on the descriptor: every later write is buffered.
    fn fall_back_to_buffered(&mut self) -> io::Result<()> {
        clear_direct_flag(&self.file)?;
        self.direct = false;
        self.tail_start = None;
        metrics::counter!("sluice_wal_direct_io_fallbacks_total").increment(1);
        tracing::warn!(
            "the file system refused an O_DIRECT write: WAL segment writes are buffered"
        );
        Ok(())
    }
}

impl WritableFile for DirectFile {
    fn write_vectored_at(&mut self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize> {
        if self.direct {
            match self.write_direct(bufs, offset) {
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => self.fall_back_to_buffered()?,
                other => return other,
            }
        }
        os::pwritev(&self.file, bufs, offset)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn is_direct(&self) -> bool {
        self.direct
    }
}

#[cfg(unix)]
fn pwrite(file: &File, buf: &[u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::write_at(file, buf, offset)
}

#[cfg(unix)]
fn pread(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

// Elsewhere no file is ever opened direct (`open_direct` refuses); these only compile.
#[cfg(not(unix))]
fn pwrite(file: &File, buf: &[u8], offset: u64) -> io::Result<usize> {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = file;
    f.seek(SeekFrom::Start(offset))?;
    f.write(buf)
}

#[cfg(not(unix))]
fn pread(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = file;
    f.seek(SeekFrom::Start(offset))?;
    f.read(buf)
}

#[cfg(target_os = "linux")]
fn clear_direct_flag(file: &File) -> io::Result<()> {
    use std::os::unix::io::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: the descriptor belongs to `file`, which outlives both calls.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_DIRECT) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn clear_direct_flag(_file: &File) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::os::unix::fs::OpenOptionsExt;

    const LEN: u64 = 4 << 20;

    /// A segment-like file in `dir`: direct wherever the file system allows it (on disk, and
    /// on the Linux 6.18 tmpfs of the host they were written on); the checks below hold
    /// either way.
    /// `tests/it/direct_io.rs` asserts the flag on a segment on the target's disk.
    fn create(dir: &Path) -> Box<dyn WritableFile> {
        let file = DirectFileSystem
            .create_preallocated(&dir.join("seg"), LEN)
            .expect("create");
        if !file.is_direct() {
            eprintln!(
                "{} refuses O_DIRECT: testing the buffered file",
                dir.display()
            );
        }
        file
    }

    /// Writes `bytes` at `offset` in two slices, looping over short writes.
    fn write(file: &mut dyn WritableFile, bytes: &[u8], offset: u64, split: usize) {
        let (a, b) = bytes.split_at(split.min(bytes.len()));
        let mut slices = [IoSlice::new(a), IoSlice::new(b)];
        let mut slices = &mut slices[..];
        let mut at = offset;
        let mut left = bytes.len();
        while left > 0 {
            let n = file.write_vectored_at(slices, at).expect("write");
            assert!(n > 0, "a direct write made no progress");
            IoSlice::advance_slices(&mut slices, n);
            at += n as u64;
            left -= n;
        }
    }

    fn pattern(seed: usize, len: usize) -> Vec<u8> {
        (0..len).map(|j| (seed * 31 + j) as u8 | 1).collect()
    }

    #[test]
    fn align_helpers_round_to_blocks() {
        assert_eq!(align_down(0), 0);
        assert_eq!(align_down(4095), 0);
        assert_eq!(align_down(4096), 4096);
        assert_eq!(align_up(0), 0);
        assert_eq!(align_up(1), 4096);
        assert_eq!(align_up(4097), 8192);
    }

    #[test]
    fn aligned_buffer_starts_on_a_block() {
        for capacity in [100, 4096, STAGE_BYTES] {
            let mut buf = AlignedBuf::new(capacity);
            assert_eq!(buf.as_mut().as_ptr() as usize % DIRECT_ALIGN, 0);
            assert_eq!(buf.as_mut().len(), capacity);
        }
    }

    #[test]
    fn unaligned_appends_read_back_exactly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut file = create(dir.path());
        let mut expected = vec![0u8; LEN as usize];
        let mut offset = 0usize;
        for (i, len) in [
            36usize,
            9,
            200,
            4000,
            1,
            8191,
            4096,
            12_345,
            3,
            STAGE_BYTES + 5000,
            17,
        ]
        .into_iter()
        .enumerate()
        {
            let bytes = pattern(i, len);
            write(file.as_mut(), &bytes, offset as u64, len / 2);
            expected[offset..offset + len].copy_from_slice(&bytes);
            offset += len;
        }
        file.sync_data().expect("sync");
        let on_disk = std::fs::read(dir.path().join("seg")).expect("read");
        assert_eq!(on_disk, expected);
    }

    #[test]
    fn a_write_behind_the_last_one_or_past_a_gap_keeps_the_bytes_before_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut file = create(dir.path());
        let a = pattern(1, 5000);
        write(file.as_mut(), &a, 0, 100);
        write(file.as_mut(), &pattern(2, 3000), 5000, 0);
        // A retry of the second write, with other bytes: its block starts before the tail.
        let b = pattern(3, 3000);
        write(file.as_mut(), &b, 5000, 2999);
        // Past a gap inside the next block: the gap reads as zeros.
        let c = pattern(4, 10);
        write(file.as_mut(), &c, 8100, 5);
        file.sync_data().expect("sync");
        let on_disk = std::fs::read(dir.path().join("seg")).expect("read");
        assert_eq!(&on_disk[..5000], &a[..]);
        assert_eq!(&on_disk[5000..8000], &b[..]);
        assert!(on_disk[8000..8100].iter().all(|&x| x == 0));
        assert_eq!(&on_disk[8100..8110], &c[..]);
    }

    #[test]
    fn after_falling_back_writes_are_buffered_and_still_exact() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("seg");
        let file = DirectFileSystem
            .create_preallocated(&path, LEN)
            .expect("create");
        if !file.is_direct() {
            return; // nothing to fall back from on this file system
        }
        drop(file);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .expect("open");
        let mut file = DirectFile::new(file);
        let a = pattern(5, 300);
        write(&mut file, &a, 0, 7);
        file.fall_back_to_buffered().expect("fall back");
        assert!(!file.direct);
        let b = pattern(6, 77);
        write(&mut file, &b, 300, 30);
        file.sync_data().expect("sync");
        let on_disk = std::fs::read(&path).expect("read");
        assert_eq!(&on_disk[..300], &a[..]);
        assert_eq!(&on_disk[300..377], &b[..]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Appends of any length, each split anywhere, with retries that go back up to the
        /// previous write's start: the file always holds exactly the bytes of the log's
        /// current extent.
        #[test]
        fn appends_and_retries_match_a_plain_model(
            steps in proptest::collection::vec((prop_oneof![8 => 0usize..9000, 1 => 0usize..(STAGE_BYTES + 9000)], any::<prop::sample::Index>(), 0u8..4), 1..40),
        ) {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut file = create(dir.path());
            let mut model = vec![0u8; LEN as usize];
            let mut end = 0usize;
            let mut last_start = 0usize;
            for (i, (len, split, retry)) in steps.into_iter().enumerate() {
                // One step in four rewrites from the previous write's start.
                let offset = if retry == 0 { last_start } else { end };
                let len = len.min(LEN as usize - offset);
                let bytes = pattern(i, len);
                write(file.as_mut(), &bytes, offset as u64, split.index(len + 1));
                model[offset..offset + len].copy_from_slice(&bytes);
                last_start = offset;
                end = offset + len;
            }
            file.sync_data().expect("sync");
            let on_disk = std::fs::read(dir.path().join("seg")).expect("read");
            prop_assert_eq!(&on_disk[..end], &model[..end]);
        }
    }
}
