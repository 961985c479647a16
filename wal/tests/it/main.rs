//! Integration tests of the write-ahead log through its public API (plus direct damage to
//! segment files), compiled as one test binary to keep link times down.
//!
//! The tests that damage files know the on-disk layout on purpose: segment header 36 bytes,
//! frame header 9 bytes, frame at offset `36 + (lsn - base_lsn)`. A format change must
//! change them too.

mod append_and_read;
mod back_pressure;
mod common;
mod direct_io;
mod failure;
mod file_modes;
mod group_commit;
mod hooked_fs;
mod prepared_segments;
mod recovery;
mod rotation_and_purge;
