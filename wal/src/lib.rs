//! Sluice's write-ahead log: segmented files of CRC32C frames, a group-commit writer thread,
//! the published durable LSN, policy-driven recovery, and purging of committed segments. It
//! knows nothing about gRPC or Delta; the server stores opaque frames tagged with a `kind`.
//!
//! # Contract
//!
//! - **LSNs.** An [`Lsn`] is a byte position in the logical log, continuous across segments
//!   and across restarts. A frame of `n` payload bytes takes `9 + n` LSNs;
//!   [`Wal::append`] returns the frame's end LSN. LSNs are assigned in `append` order and
//!   frames reach the file in that order.
//! - **Durability.** [`DurableState::durable`] only moves forward, and only after the bytes
//!   below it were written and (with [`Durability::Fsync`]) `fdatasync`'d. It never exceeds
//!   what a later [`Wal::open`] recovers. One sync covers every frame of a batch.
//! - **Failure is final.** After a sync error, or a write error other than a full disk, the
//!   log never acknowledges again: [`DurableState::failed`] is set,
//!   `append`/`reserve`/`wait_durable` fail with [`WalError::Failed`].
//! - **A full disk is not.** `ENOSPC` on a write or on creating a segment stalls the
//!   writer, which holds the batch and retries; meanwhile `reserve`/`append` fail with
//!   [`WalError::NoSpace`] ([`Wal::no_space`] says why) and nothing new is acknowledged.
//!   When space returns the held frames are written, synced and acknowledged, and appends
//!   work again.
//! - **Back-pressure.** At most `max_queued_bytes` of reserved-but-unwritten payload exist
//!   at once; [`Wal::reserve`] waits for space.
//! - **Recovery** (see [`RecoveryMode`] and the policy in `recovery`) cuts a torn tail of
//!   the newest segment (damage confined to the last, unsynced batch) or refuses, and
//!   refuses any other damage; the next append always goes to a brand-new segment.
//! - **Purging** takes only whole segments below a given LSN out of the log, never the active
//!   one; their files are shrunk and removed in the background (`reaper`).
//! - **Exclusive.** One open log per directory (an `flock` on `{dir}/LOCK`).
//!
//! # Modules
//!
//! | module | owns |
//! |---|---|
//! | `format` | byte layout of segment headers and frames (documented there) |
//! | [`env`] | the file system behind a trait; a fault-injecting one with `failpoints` |
//! | `fs` | the log's file operations with error context, over `env` |
//! | `segment` | segment naming, listing, creating the active segment |
//! | `spare` | the thread that keeps a zero-filled segment ready for the next rotation |
//! | `reaper` | the thread that shrinks and removes purged segments |
//! | `recovery` | scanning and repairing the directory at open |
//! | `writer` | the group-commit thread |
//! | `reader` | reading frames back for replay |
//! | `state` | state shared by the handles and the writer thread |
//! | `durable` | publishing the durable state, waking the tasks waiting for an LSN |
//! | `identity` | the stable log id in `{dir}/wal-id` |
//! | `wal` | the public [`Wal`] handle |
//! | `options`, `error` | configuration, [`WalError`] |

mod durable;
pub mod env;
mod error;
mod format;
mod fs;
mod identity;
mod lsn;
mod options;
mod reader;
mod reaper;
mod recovery;
mod segment;
mod spare;
mod state;
mod sync;
mod wal;
mod writer;

pub use durable::{durable_channel, DurablePublisher, DurableWatch, Reached, Stopped};
pub use error::{Result, WalError};
pub use fs::{lock_dir, DIR_MODE, FILE_MODE};
pub use lsn::Lsn;
pub use options::{Durability, RecoveryMode, WalOptions};
pub use reader::Frame;
pub use recovery::Recovered;
pub use state::DurableState;
pub use wal::{Reservation, Wal};
