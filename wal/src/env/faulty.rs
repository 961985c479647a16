//! [`FaultyFileSystem`] (cargo feature `failpoints`): the real file system plus injected
//! faults, for the `failpoints` test target.
//!
//! It wraps [`DefaultFileSystem`], or [`DirectFileSystem`] ([`FaultyFileSystem::direct`]).
//! Faults are switched on and off while a log runs: short writes (every `pwritev` writes
//! at most half of what it was given), an errno for every write, an errno for every
//! `fdatasync`, an errno for creating a file (`ENOSPC` at `fallocate`), and
//! [`FaultyFileSystem::power_cut`].
//!
//! The power cut model: for every file created through it, the file system remembers the
//! content it had at its last successful `fdatasync` (or `truncate`, which syncs). A power
//! cut rewrites every such file to that image (a file never synced is removed), and from
//! then on every operation fails with `EIO` (the machine is off): what the process wrote
//! since its last sync is gone, what it synced is intact. Directory operations are treated
//! as durable at once (the log fsyncs its directory right after each of them).
//!
//! Every operation on a file takes the one state lock for its whole duration, so a power
//! cut never interleaves with a write in flight.

use std::collections::HashMap;
use std::io::{self, IoSlice, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::default::DefaultFileSystem;
use super::direct::DirectFileSystem;
use super::file::{FileSystem, WritableFile};

/// A [`FileSystem`] that injects faults; clones share one state.
#[derive(Clone, Default)]
pub struct FaultyFileSystem {
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    /// Segments are created through [`DirectFileSystem`] (`O_DIRECT`).
    direct: bool,
    short_writes: bool,
    write_errno: Option<i32>,
    sync_errno: Option<i32>,
    create_errno: Option<i32>,
    powered_off: bool,
    /// Content at the last successful sync of every file created here (`None`: never
    /// synced).
    images: HashMap<PathBuf, Option<Vec<u8>>>,
    /// Old name → new name of every rename, so an open file finds its current name.
    renamed: HashMap<PathBuf, PathBuf>,
    syncs: u64,
    writes: u64,
    /// Sizes passed to successful [`FileSystem::shrink`] calls, in order.
    shrinks: Vec<u64>,
}

impl std::fmt::Debug for FaultyFileSystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FaultyFileSystem")
    }
}

fn errno(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

impl FaultyFileSystem {
    /// The real file system with no fault armed.
    pub fn new() -> Self {
        Self::default()
    }

    /// [`FaultyFileSystem::new`] over [`DirectFileSystem`]: segments are written through
    /// `O_DIRECT` (where the file system allows it), faults injected above that.
    pub fn direct() -> Self {
        let fs = Self::default();
        fs.state().direct = true;
        fs
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every later write writes at most half of its buffers (at least one byte).
    pub fn set_short_writes(&self, on: bool) {
        self.state().short_writes = on;
    }

    /// Every later write fails with `errno` (e.g. `libc::EIO`, `libc::ENOSPC`); `None` heals.
    pub fn set_write_error(&self, errno: Option<i32>) {
        self.state().write_errno = errno;
    }

    /// Every later `fdatasync` fails with `errno`; `None` heals.
    pub fn set_sync_error(&self, errno: Option<i32>) {
        self.state().sync_errno = errno;
    }

    /// Every later file creation fails with `errno` (as `fallocate` does on a full disk).
    pub fn set_create_error(&self, errno: Option<i32>) {
        self.state().create_errno = errno;
    }

    /// Shorthand for a full disk (`ENOSPC` on writes and creations) or its end.
    pub fn set_disk_full(&self, full: bool) {
        let errno = full.then_some(libc::ENOSPC);
        let mut state = self.state();
        state.write_errno = errno;
        state.create_errno = errno;
    }

    /// Successful `fdatasync` calls so far.
    pub fn syncs(&self) -> u64 {
        self.state().syncs
    }

    /// The sizes successful shrinks cut files to so far, in order.
    pub fn shrinks(&self) -> Vec<u64> {
        self.state().shrinks.clone()
    }

    /// Successful write calls so far.
    pub fn writes(&self) -> u64 {
        self.state().writes
    }

    /// Cuts the power: every file goes back to its content at its last successful sync,
    /// and every later operation through this file system fails with `EIO`.
    pub fn power_cut(&self) -> io::Result<()> {
        let mut state = self.state();
        state.powered_off = true;
        for (path, image) in state.images.drain() {
            match image {
                None => match std::fs::remove_file(&path) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                },
                Some(bytes) => {
                    if path.exists() {
                        std::fs::write(&path, bytes)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn check_on(state: &State) -> io::Result<()> {
        if state.powered_off {
            Err(errno(libc::EIO))
        } else {
            Ok(())
        }
    }
}

struct FaultyFile {
    inner: Box<dyn WritableFile>,
    path: PathBuf,
    state: Arc<Mutex<State>>,
}

impl WritableFile for FaultyFile {
    fn write_vectored_at(&mut self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize> {
        let state = Arc::clone(&self.state);
        let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
        FaultyFileSystem::check_on(&state)?;
        if let Some(code) = state.write_errno {
            return Err(errno(code));
        }
        let n = if state.short_writes {
            let total: usize = bufs.iter().map(|b| b.len()).sum();
            let half = (total / 2).max(1);
            // Write a prefix of `half` bytes, splitting the buffer it ends in.
            let mut prefix = Vec::with_capacity(half);
            for b in bufs {
                let take = (half - prefix.len()).min(b.len());
                prefix.extend_from_slice(&b[..take]);
                if prefix.len() == half {
                    break;
                }
            }
            self.inner
                .write_vectored_at(&[IoSlice::new(&prefix)], offset)?
        } else {
            self.inner.write_vectored_at(bufs, offset)?
        };
        state.writes += 1;
        Ok(n)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        let state = Arc::clone(&self.state);
        let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
        FaultyFileSystem::check_on(&state)?;
        if let Some(code) = state.sync_errno {
            return Err(errno(code));
        }
        self.inner.sync_data()?;
        while let Some(new) = state.renamed.get(&self.path) {
            self.path = new.clone();
        }
        let image = std::fs::read(&self.path)?;
        state.images.insert(self.path.clone(), Some(image));
        state.syncs += 1;
        Ok(())
    }

    fn is_direct(&self) -> bool {
        self.inner.is_direct()
    }
}

impl FileSystem for FaultyFileSystem {
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        Self::check_on(&self.state())?;
        DefaultFileSystem.list_dir(dir)
    }

    fn create_preallocated(&self, path: &Path, len: u64) -> io::Result<Box<dyn WritableFile>> {
        let mut state = self.state();
        Self::check_on(&state)?;
        if let Some(code) = state.create_errno {
            return Err(errno(code));
        }
        let inner = if state.direct {
            DirectFileSystem.create_preallocated(path, len)?
        } else {
            DefaultFileSystem.create_preallocated(path, len)?
        };
        state.images.insert(path.to_path_buf(), None);
        // A new file under a name an older file was renamed away from.
        state.renamed.remove(path);
        Ok(Box::new(FaultyFile {
            inner,
            path: path.to_path_buf(),
            state: Arc::clone(&self.state),
        }))
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        Self::check_on(&self.state())?;
        DefaultFileSystem.open_read(path)
    }

    fn read_file(&self, path: &Path) -> io::Result<Vec<u8>> {
        Self::check_on(&self.state())?;
        DefaultFileSystem.read_file(path)
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let mut state = self.state();
        Self::check_on(&state)?;
        DefaultFileSystem.truncate(path, len)?;
        if let Some(image) = state.images.get_mut(path) {
            *image = Some(std::fs::read(path)?);
        }
        Ok(())
    }

    fn shrink(&self, path: &Path, len: u64) -> io::Result<()> {
        let mut state = self.state();
        Self::check_on(&state)?;
        // Not synced: a power cut brings the file back to its last synced image.
        DefaultFileSystem.shrink(path, len)?;
        state.shrinks.push(len);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state();
        Self::check_on(&state)?;
        DefaultFileSystem.remove_file(path)?;
        state.images.remove(path);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.state();
        Self::check_on(&state)?;
        DefaultFileSystem.rename(from, to)?;
        if let Some(image) = state.images.remove(from) {
            state.images.insert(to.to_path_buf(), image);
        }
        state.renamed.remove(to);
        state.renamed.insert(from.to_path_buf(), to.to_path_buf());
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        Self::check_on(&self.state())?;
        DefaultFileSystem.sync_dir(dir)
    }
}
