//! The group-commit writer: one std thread that owns the active segment and is the only
//! code that writes frames or publishes the durable LSN.
//!
//! ```text
//! producers ── append(): assign LSN, send ──▶ crossbeam channel ──▶ writer thread
//!                                                                     │ recv() the first command (blocks)
//!                                                                     │ try_recv() everything else queued, up to MAX_BATCH_BYTES
//!                                                                     │ writev the gathered headers + payloads (rotating if needed)
//!                                                                     │ fdatasync (Durability::Fsync)
//!                                                                     │ send_replace(DurableState { durable: end of batch })
//!                                                                     ▼ drop the batch: queued-bytes permits return
//! ```
//!
//! While one `fdatasync` runs, producers keep enqueuing, so the next batch gathers by itself:
//! there are no timers and no sleeps, and one sync covers every frame that arrived during
//! the previous one. Subscribers are woken once per batch, never once per frame.
//!
//! Rotation: when a frame does not fit the active segment, the writer writes what fits,
//! `fdatasync`s the segment (in every durability mode, so a later segment never exists
//! beside an unsynced earlier one), and creates the next segment with `base_lsn` = that
//! frame's LSN.
//!
//! Failure: the first write, sync or create error is final. The writer records it, publishes
//! `DurableState::failed`, closes the queue semaphore (waking every `reserve`), and from then
//! on only drains and drops commands. It never retries an `fdatasync`: after a failed sync
//! the kernel may have dropped the dirty pages, so a later success would prove nothing.

use std::io::IoSlice;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use tokio::sync::{watch, OwnedSemaphorePermit};

use crate::error::{Result, WalError};
use crate::format::{frame_len, FrameHeader, FRAME_HEADER_LEN};
use crate::options::Durability;
use crate::segment::ActiveSegment;
use crate::state::{lock, DurableState, Failure, Shared};
use crate::Lsn;

/// A batch stops gathering once it holds this many bytes (a single larger frame still goes).
const MAX_BATCH_BYTES: u64 = 4 << 20;

/// One frame on its way to disk, holding the queued-bytes permits of its reservation.
pub(crate) struct Pending {
    pub lsn: Lsn,
    pub kind: u8,
    pub payload: Vec<u8>,
    /// Held only to be dropped once the frame is written.
    pub _permit: OwnedSemaphorePermit,
}

impl Pending {
    pub(crate) fn end_lsn(&self) -> Lsn {
        self.lsn + frame_len(self.payload.len())
    }
}

/// What the handles send to the writer thread.
pub(crate) enum Command {
    Append(Pending),
    /// Write and sync everything before this command, reply, exit.
    Close(Sender<Result<()>>),
}

pub(crate) struct Writer {
    pub dir: PathBuf,
    pub rx: Receiver<Command>,
    pub state: watch::Sender<DurableState>,
    pub shared: Arc<Shared>,
    pub active: ActiveSegment,
    pub next_segment_id: u64,
    pub segment_bytes: u64,
    pub durability: Durability,
    /// Bytes written to the active segment since its last `fdatasync`.
    pub unsynced: bool,
}

impl Writer {
    pub(crate) fn spawn(self) -> Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name("sluice-wal-writer".into())
            .spawn(move || self.run())
            .map_err(|e| WalError::io("spawn the WAL writer thread", e))
    }

    fn run(mut self) {
        loop {
            let Ok(first) = self.rx.recv() else {
                // Every handle is gone without a close: still leave the log synced.
                if let Err(e) = self.finish() {
                    tracing::warn!(error = %e, "WAL writer stopped after a failure");
                }
                return;
            };
            let (batch, close) = self.gather(first);
            if !batch.is_empty() {
                self.commit(&batch);
            }
            release(batch);
            if let Some(reply) = close {
                // The handle waiting for this reply may itself be gone; nothing to do then.
                let _ = reply.send(self.finish());
                return;
            }
        }
    }

    /// The first command plus everything already queued behind it, up to the byte cap or a
    /// close command.
    fn gather(&self, first: Command) -> (Vec<Pending>, Option<Sender<Result<()>>>) {
        let mut batch = Vec::new();
        let mut bytes = 0;
        let mut next = Some(first);
        while let Some(command) = next.take() {
            match command {
                Command::Append(p) => {
                    bytes += frame_len(p.payload.len());
                    batch.push(p);
                }
                Command::Close(reply) => return (batch, Some(reply)),
            }
            if bytes < MAX_BATCH_BYTES {
                next = self.rx.try_recv().ok();
            }
        }
        (batch, None)
    }

    /// Writes, syncs and publishes one batch; records a failure instead of returning it.
    fn commit(&mut self, batch: &[Pending]) {
        if self.shared.failure.get().is_some() {
            return;
        }
        let written = self.write_batch(batch).and_then(|()| {
            if self.durability == Durability::Fsync {
                self.sync()?;
            }
            Ok(())
        });
        match written {
            Ok(()) => {
                let durable = self.active.next_lsn();
                self.state.send_replace(DurableState {
                    durable,
                    failed: None,
                });
                metrics::counter!("sluice_wal_frames_total").increment(batch.len() as u64);
                metrics::histogram!("sluice_wal_batch_frames").record(batch.len() as f64);
            }
            Err(e) => self.fail(e),
        }
    }

    fn write_batch(&mut self, batch: &[Pending]) -> Result<()> {
        let mut start = 0;
        while let Some(first) = batch.get(start) {
            if first.lsn != self.active.next_lsn() {
                return Err(WalError::Failed(format!(
                    "frame at lsn {} does not follow the log end {}",
                    first.lsn,
                    self.active.next_lsn()
                )));
            }
            if !self.active.fits(first.end_lsn()) {
                self.rotate(first.lsn, frame_len(first.payload.len()))?;
            }
            let end = batch[start..]
                .iter()
                .position(|p| !self.active.fits(p.end_lsn()))
                .map_or(batch.len(), |n| start + n);
            self.write_run(&batch[start..end])?;
            start = end;
        }
        Ok(())
    }

    /// Writes consecutive frames that all fit the active segment with one gathered write.
    fn write_run(&mut self, frames: &[Pending]) -> Result<()> {
        let Some(last) = frames.last() else {
            return Ok(());
        };
        let headers: Vec<[u8; FRAME_HEADER_LEN]> = frames
            .iter()
            .map(|p| FrameHeader::new(p.lsn, p.kind, &p.payload).encode())
            .collect();
        let mut slices = Vec::with_capacity(frames.len() * 2);
        let mut bytes = 0;
        for (header, p) in headers.iter().zip(frames) {
            slices.push(IoSlice::new(header));
            slices.push(IoSlice::new(&p.payload));
            bytes += frame_len(p.payload.len());
        }
        self.active.write(&mut slices, last.end_lsn())?;
        self.unsynced = true;
        metrics::counter!("sluice_wal_bytes_written_total").increment(bytes);
        Ok(())
    }

    /// Seals the active segment (synced) and makes a new one start at `base_lsn`.
    fn rotate(&mut self, base_lsn: Lsn, first_frame_bytes: u64) -> Result<()> {
        self.sync()?;
        let next = ActiveSegment::create(
            &self.dir,
            self.next_segment_id,
            base_lsn,
            self.segment_bytes,
            first_frame_bytes,
        )?;
        self.next_segment_id += 1;
        let mut segments = lock(&self.shared.segments);
        // An active segment that holds no frame yet is replaced in place (same name).
        if segments.last() != Some(next.meta()) {
            segments.push(next.meta().clone());
        }
        drop(segments);
        self.active = next;
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        if !self.unsynced {
            return Ok(());
        }
        let started = Instant::now();
        self.active.sync()?;
        metrics::histogram!("sluice_wal_fsync_seconds").record(started.elapsed().as_secs_f64());
        metrics::counter!("sluice_wal_fsyncs_total").increment(1);
        self.unsynced = false;
        Ok(())
    }

    /// Last act of the thread: sync whatever is unsynced (whatever the durability mode) and
    /// report how the log ends.
    fn finish(&mut self) -> Result<()> {
        if let Some(e) = self.shared.failure_error() {
            return Err(e);
        }
        match self.sync() {
            Ok(()) => {
                let durable = self.active.next_lsn();
                self.state.send_if_modified(|s| {
                    let changed = s.durable != durable;
                    s.durable = durable;
                    changed
                });
                Ok(())
            }
            Err(e) => {
                self.fail(e);
                Err(self
                    .shared
                    .failure_error()
                    .unwrap_or_else(|| WalError::Failed("final sync failed".into())))
            }
        }
    }

    fn fail(&mut self, e: WalError) {
        tracing::error!(error = %e, "WAL can no longer make data durable");
        let failure = Failure::from_error(&e);
        let message: Arc<str> = failure.message().into();
        // Only the writer sets the failure, and only once: it never writes again after it.
        let _ = self.shared.failure.set(failure);
        self.state.send_modify(|s| s.failed = Some(message));
        self.shared.queue.close();
    }
}

/// Drops a written (or discarded) batch: its permits go back to the queue.
fn release(batch: Vec<Pending>) {
    let bytes: u64 = batch.iter().map(|p| frame_len(p.payload.len())).sum();
    metrics::gauge!("sluice_wal_queued_bytes").decrement(bytes as f64);
    drop(batch);
}
