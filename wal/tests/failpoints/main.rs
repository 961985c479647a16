//! Fault-injection tests of the write-ahead log (cargo feature `failpoints`): the log runs
//! on [`sluice_wal::env::FaultyFileSystem`], which injects short writes, `EIO` on write and
//! on `fdatasync`, `ENOSPC`, and power cuts that drop every write since the last sync.
//!
//! Run with `cargo test -p sluice-wal --features failpoints --test failpoints`.
//!
//! The contracts under test: an ack never covers unsynced data; after an `fdatasync` error
//! the log never acks again; a full disk stalls (refusing new work with `NoSpace`) and
//! resumes when space returns; after a power cut, reopening recovers exactly the synced
//! prefix.

#[allow(dead_code)]
#[path = "../it/common.rs"]
mod common;

mod disk_full;
mod io_errors;
mod power_cut;
mod purge;
mod support;
