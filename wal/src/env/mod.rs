//! The file system behind a trait (after raft-engine's `env`), so that tests can swap it for
//! one that injects faults.
//!
//! [`FileSystem`] is the seam: every file operation the log performs on segments goes
//! through it (listing, creating and preallocating, reading, truncating, shrinking a retired
//! file, removing, directory fsync), and the active segment is a [`WritableFile`] (positioned `writev`, `fdatasync`).
//! The methods are raw: they return [`std::io::Result`] and do no retrying, so that a short
//! write or an `EINTR` injected here exercises the log's own loops. The log adds the
//! operation and path to every error.
//!
//! Contract an implementation must keep (the log's durability rests on it):
//!
//! - [`WritableFile::sync_data`] returning `Ok` means every byte written to that file before
//!   the call is on stable storage and reads back after a power loss.
//! - [`FileSystem::sync_dir`] returning `Ok` makes every creation, removal and rename in that
//!   directory durable.
//! - [`FileSystem::create_preallocated`] reserves the space: writes inside `len` bytes do not
//!   change the file's size.
//! - [`FileSystem::rename`] replaces the target atomically; a [`WritableFile`] opened before
//!   keeps writing to the same file under its new name.
//!
//! [`DefaultFileSystem`] is the real thing (`std::fs` plus `fallocate`, `flock`-free).
//! [`DirectFileSystem`] is the same with segments written through `O_DIRECT`
//! (`WalOptions::direct_io`): a direct file may overwrite the rest of the last block a write
//! ends in with zeros (growing a file whose length is not a multiple of 4 KiB to the block's
//! end), which the log allows, since it only ever writes at its end and nothing past that
//! end is read as a frame.
//! With the cargo feature `failpoints`, [`FaultyFileSystem`] wraps it and injects short
//! writes, `EIO`/`ENOSPC` on write, `EIO` on `fdatasync`, `ENOSPC` on create, and a power
//! cut that drops every write made since the file's last successful `fdatasync`.

mod default;
mod direct;
#[cfg(feature = "failpoints")]
mod faulty;
pub(crate) mod file;
pub(crate) mod os;

pub use default::DefaultFileSystem;
pub use direct::{DirectFileSystem, DIRECT_ALIGN};
#[cfg(feature = "failpoints")]
pub use faulty::FaultyFileSystem;
pub use file::{FileSystem, WritableFile};
