//! The [`Wal`] handle: open (recover, then start the writer), reserve queue space, append,
//! wait for durability, read back, purge, close. Cheap to clone; every clone is the same log.
//!
//! Appending is split in two so that memory stays bounded without blocking the async caller:
//! [`Wal::reserve`] waits (asynchronously) for queue space, [`Wal::append`] never blocks
//! beyond a tiny mutex that makes "assign the LSN + send to the writer" one step, so LSN
//! order is enqueue order is file order.

use std::fmt;
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::Sender;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::durable::{durable_channel, DurableWatch};
use crate::env::{DefaultFileSystem, DirectFileSystem, FileSystem};
use crate::error::{Result, WalError};
use crate::format::{frame_len, is_end_marker_frame};
use crate::fs;
use crate::identity;
use crate::lsn::Lsn;
use crate::options::WalOptions;
use crate::reader::{Frame, FrameReader};
use crate::reaper::{self, Reaper};
use crate::recovery::{self, Outcome, Recovered};
use crate::segment::{list_segments, ActiveSegment};
use crate::spare::{self, Preparer};
use crate::state::{DurableState, Shared};
use crate::sync::lock;
use crate::writer::{Command, Pending, Writer};

/// Queue space for one frame, from [`Wal::reserve`]. Hand it to [`Wal::append`]; dropping
/// it instead gives the space back.
pub struct Reservation {
    permit: OwnedSemaphorePermit,
    bytes: usize,
}

impl Reservation {
    /// The byte count this reservation was asked for.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl fmt::Debug for Reservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("bytes", &self.bytes)
            .field("permits", &self.permit.num_permits())
            .finish()
    }
}

/// A handle on an open write-ahead log. See the crate docs for the guarantees.
#[derive(Clone)]
pub struct Wal {
    inner: Arc<Inner>,
}

struct Inner {
    env: Arc<dyn FileSystem>,
    dir: PathBuf,
    id: String,
    shared: Arc<Shared>,
    /// The published state: read, cloned for subscribers, waited on by LSN.
    state: DurableWatch,
    enqueue: Mutex<Enqueue>,
    writer: Mutex<Option<JoinHandle<()>>>,
    /// Permits of the queue semaphore: the most one reservation can take.
    max_permits: usize,
    /// The directory lock, released at close.
    dir_lock: Mutex<Option<File>>,
    /// Removes purged segments in the background; stopped at close.
    reaper: Mutex<Reaper>,
    /// Held by a purge from choosing its segments until they leave the list.
    purging: Mutex<()>,
    /// The segment created at open is written through `O_DIRECT`.
    direct_io: bool,
}

/// What the append mutex protects: LSN assignment and the channel, in one step.
struct Enqueue {
    next_lsn: Lsn,
    /// `None` once closed.
    tx: Option<Sender<Command>>,
}

impl Wal {
    /// Opens (or creates) the log in `opts.dir`: takes the directory lock, recovers
    /// according to `opts.recovery`, creates a fresh segment at the recovered end and starts
    /// the group-commit thread.
    pub fn open(opts: WalOptions) -> Result<(Wal, Recovered)> {
        let env: Arc<dyn FileSystem> = if opts.direct_io {
            Arc::new(DirectFileSystem)
        } else {
            Arc::new(DefaultFileSystem)
        };
        Self::open_with_fs(opts, env)
    }

    /// [`Wal::open`] on the file system `env` (see [`crate::env`]): tests pass one that
    /// injects faults. The directory lock and the `wal-id` file always use `std`.
    pub fn open_with_fs(opts: WalOptions, env: Arc<dyn FileSystem>) -> Result<(Wal, Recovered)> {
        opts.sanitize()?;
        let dir = opts.dir.clone();
        fs::create_dir_all(&dir)?;
        let dir_lock = fs::lock_dir(&dir)?;
        spare::remove_leftovers(env.as_ref(), &dir)?;
        reaper::remove_leftovers(env.as_ref(), &dir)?;
        let has_segments = !list_segments(env.as_ref(), &dir)?.is_empty();
        let id = identity::load_or_create(&dir, has_segments)?;
        let Outcome {
            recovered,
            mut segments,
            next_segment_id,
        } = recovery::recover(env.as_ref(), &dir, opts.recovery)?;

        let end = recovered.end_lsn;
        // A kept segment starting at the end holds no frame: it is recreated from scratch.
        if segments.last().is_some_and(|s| s.base_lsn == end) {
            segments.pop();
        }
        let active = ActiveSegment::create(
            env.as_ref(),
            &dir,
            next_segment_id,
            end,
            opts.segment_bytes,
            0,
        )?;
        segments.push(active.meta().clone());
        let direct_io = active.is_direct();

        let max_permits = opts
            .max_queued_bytes
            .min(u32::MAX as usize)
            .min(Semaphore::MAX_PERMITS);
        let shared = Arc::new(Shared::new(segments, max_permits));
        let (state_tx, state_rx) = durable_channel(DurableState {
            durable: end,
            failed: None,
        });
        let (tx, rx) = crossbeam_channel::unbounded();
        let handle = Writer {
            env: Arc::clone(&env),
            dir: dir.clone(),
            rx,
            state: state_tx,
            shared: Arc::clone(&shared),
            active,
            next_segment_id: next_segment_id + 1,
            segment_bytes: opts.segment_bytes,
            durability: opts.durability,
            unsynced: false,
            deferred: Default::default(),
            preparer: if opts.prepare_segments {
                Some(Preparer::start(
                    Arc::clone(&env),
                    dir.clone(),
                    opts.segment_bytes,
                )?)
            } else {
                None
            },
        }
        .spawn()?;
        let reaper = Reaper::start(Arc::clone(&env))?;

        let wal = Wal {
            inner: Arc::new(Inner {
                env,
                dir,
                id,
                shared,
                state: state_rx,
                enqueue: Mutex::new(Enqueue {
                    next_lsn: end,
                    tx: Some(tx),
                }),
                writer: Mutex::new(Some(handle)),
                max_permits,
                dir_lock: Mutex::new(Some(dir_lock)),
                reaper: Mutex::new(reaper),
                purging: Mutex::new(()),
                direct_io,
            }),
        };
        Ok((wal, recovered))
    }

    /// The log's stable identity (the `wal-id` file), used as the Delta txn app id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// Whether the segment created at open is written through `O_DIRECT`: false when
    /// `WalOptions::direct_io` was off or the file system refused the flag. (A later write
    /// refused with `EINVAL` turns a segment buffered; that is logged and counted in
    /// `sluice_wal_direct_io_fallbacks_total`.)
    pub fn direct_io(&self) -> bool {
        self.inner.direct_io
    }

    /// Every frame with `end_lsn > from` that was on disk at open or is durable now, in LSN
    /// order. Frames below the oldest segment still on disk are simply not there.
    pub fn read_from(&self, from: Lsn) -> Result<impl Iterator<Item = Result<Frame>> + Send> {
        let limit = self.durable_lsn();
        let segments = lock(&self.inner.shared.segments).clone();
        Ok(FrameReader::new(
            Arc::clone(&self.inner.env),
            segments,
            from,
            limit,
        ))
    }

    /// Waits until `bytes` more bytes may be queued (a request larger than
    /// `max_queued_bytes` waits for the whole queue to be empty). `bytes` is the payload
    /// size about to be appended. Fails once the log is closed or failed, and with
    /// [`WalError::NoSpace`] while the disk is full (see [`Wal::no_space`]).
    pub async fn reserve(&self, bytes: usize) -> Result<Reservation> {
        self.inner.check_open()?;
        let permits = u32::try_from(bytes.min(self.inner.max_permits)).unwrap_or(u32::MAX);
        match Arc::clone(&self.inner.shared.queue)
            .acquire_many_owned(permits)
            .await
        {
            Ok(permit) => Ok(Reservation { permit, bytes }),
            Err(_) => Err(self.inner.stopped_error()),
        }
    }

    /// Queues one frame without blocking and returns its END lsn: the frame is durable once
    /// [`Wal::durable_lsn`] reaches that value. LSNs follow the order of `append` calls.
    /// Refuses a payload over `u32::MAX` bytes and the reserved kind-0 empty frame, and
    /// fails with [`WalError::NoSpace`] while the disk is full.
    pub fn append(&self, reservation: Reservation, kind: u8, payload: Vec<u8>) -> Result<Lsn> {
        if is_end_marker_frame(kind, &payload) {
            return Err(WalError::InvalidArgument(
                "a frame of kind 0 with an empty payload is reserved (it reads as end of data)"
                    .into(),
            ));
        }
        if u32::try_from(payload.len()).is_err() {
            return Err(WalError::InvalidArgument(format!(
                "frame payload of {} bytes exceeds the {} byte limit",
                payload.len(),
                u32::MAX
            )));
        }
        if let Some(e) = self.inner.shared.refusal() {
            return Err(e);
        }
        let len = frame_len(payload.len());
        let mut enqueue = lock(&self.inner.enqueue);
        let Some(tx) = enqueue.tx.as_ref() else {
            return Err(WalError::Closed);
        };
        let lsn = enqueue.next_lsn;
        let pending = Pending {
            lsn,
            kind,
            payload,
            _permit: reservation.permit,
        };
        if tx.send(Command::Append(pending)).is_err() {
            return Err(self.inner.stopped_error());
        }
        enqueue.next_lsn = lsn + len;
        drop(enqueue);
        metrics::gauge!("sluice_wal_queued_bytes").increment(len as f64);
        Ok(lsn + len)
    }

    /// Why the writer is holding a batch, while the disk is full: `reserve` and `append`
    /// fail with [`WalError::NoSpace`] meanwhile; frames already appended wait (they are
    /// acknowledged once space returns and they are synced). `None` when writing normally.
    pub fn no_space(&self) -> Option<String> {
        if !self.inner.shared.is_stalled() {
            return None;
        }
        lock(&self.inner.shared.stall).clone()
    }

    /// Every frame ending at or below this LSN is durable.
    pub fn durable_lsn(&self) -> Lsn {
        self.inner.state.borrow().durable
    }

    /// A receiver of [`DurableState`], updated once per written batch.
    pub fn subscribe(&self) -> watch::Receiver<DurableState> {
        self.inner.state.receiver()
    }

    /// A [`DurableWatch`] on the log: the state, and waits for an LSN that wake only when
    /// it is durable (not at every batch, as a [`subscribe`](Self::subscribe)r is).
    pub fn durable_watch(&self) -> DurableWatch {
        self.inner.state.clone()
    }

    /// Returns once `durable_lsn() >= lsn`; fails if the log fails or closes first.
    pub async fn wait_durable(&self, lsn: Lsn) -> Result<()> {
        // On `Stopped` the writer has exited; its last publication is final.
        let _ = self.inner.state.reached(lsn).await;
        if self.inner.state.borrow().durable >= lsn {
            Ok(())
        } else {
            Err(self.inner.stopped_error())
        }
    }

    /// Purges the oldest segment files whose every frame ends at or below `lsn`, never the
    /// active one, and returns how many. Each leaves the log at once — renamed to a retired
    /// name, then one directory fsync — and its blocks go back to the file system in the
    /// background, in steps (see `reaper`: an `unlink` of a whole segment stalled the
    /// writer's fdatasyncs). A rename that fails stops the purge there; the segments before
    /// it are purged all the same.
    pub fn purge_below(&self, lsn: Lsn) -> Result<usize> {
        let _purging = lock(&self.inner.purging);
        // Segment i's frames end where segment i + 1 begins; the last one is active.
        let candidates: Vec<(PathBuf, Lsn)> = lock(&self.inner.shared.segments)
            .windows(2)
            .take_while(|pair| pair[1].base_lsn <= lsn)
            .map(|pair| (pair[0].path.clone(), pair[0].base_lsn))
            .collect();
        if candidates.is_empty() {
            return Ok(0);
        }
        let env = self.inner.env.as_ref();
        let dir = &self.inner.dir;
        let mut retired = Vec::with_capacity(candidates.len());
        let mut outcome = Ok(());
        for (path, base_lsn) in &candidates {
            let to = reaper::retired_path(dir, *base_lsn);
            if let Err(e) = fs::rename(env, path, &to) {
                outcome = Err(e);
                break;
            }
            tracing::debug!(segment = %path.display(), "purged segment");
            retired.push(to);
        }
        let purged = retired.len();
        // Renamed files are out of the log whether or not the directory sync below works.
        lock(&self.inner.shared.segments).drain(..purged);
        if purged > 0 {
            // Shrinking starts only once the renames are durable: a crash must never find a
            // cut file under a segment's name. If the sync fails, the files stay whole until
            // the next open removes them.
            match fs::sync_dir(env, dir) {
                Ok(()) => {
                    let reaper = lock(&self.inner.reaper);
                    for path in retired {
                        reaper.retire(path);
                    }
                }
                Err(e) => outcome = outcome.and(Err(e)),
            }
        }
        outcome.map(|()| purged)
    }

    /// Bytes appended but not yet durable: the group-commit queue's depth.
    pub fn queued_bytes(&self) -> u64 {
        let next = lock(&self.inner.enqueue).next_lsn;
        next.saturating_sub(self.durable_lsn())
    }

    /// Closes the log and deletes it: every segment, oldest first, then the id file, each
    /// deletion followed by a directory fsync. Afterwards the directory holds no log; the
    /// next open creates a new one with a new id.
    ///
    /// Only for a caller that has copied every frame elsewhere for good (a drained pod whose
    /// tables committed up to the log's end): the frames are gone after this. Returns how
    /// many segments were deleted.
    pub fn close_and_delete(&self) -> Result<usize> {
        self.close()?;
        let _purging = lock(&self.inner.purging);
        let env = self.inner.env.as_ref();
        let dir = &self.inner.dir;
        let mut segments = lock(&self.inner.shared.segments);
        let mut removed = 0;
        for meta in segments.iter() {
            fs::remove_file(env, &meta.path)?;
            fs::sync_dir(env, dir)?;
            removed += 1;
        }
        segments.clear();
        let id = dir.join(crate::identity::ID_FILE);
        if id.exists() {
            fs::remove_file(env, &id)?;
            fs::sync_dir(env, dir)?;
        }
        Ok(removed)
    }

    /// Writes and syncs everything queued, then stops the writer thread and releases the
    /// directory lock. Later appends and reservations fail with [`WalError::Closed`].
    /// Calling it again does nothing.
    pub fn close(&self) -> Result<()> {
        self.inner.close()
    }
}

impl fmt::Debug for Wal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wal")
            .field("dir", &self.inner.dir)
            .field("id", &self.inner.id)
            .field("durable", &self.durable_lsn())
            .finish()
    }
}

impl Inner {
    fn check_open(&self) -> Result<()> {
        if let Some(e) = self.shared.refusal() {
            return Err(e);
        }
        if lock(&self.enqueue).tx.is_none() {
            return Err(WalError::Closed);
        }
        Ok(())
    }

    /// The error for a log that stopped accepting work: its failure, or else closed.
    fn stopped_error(&self) -> WalError {
        self.shared.failure_error().unwrap_or(WalError::Closed)
    }

    fn close(&self) -> Result<()> {
        let tx = lock(&self.enqueue).tx.take();
        let mut result = match tx {
            Some(tx) => {
                let (reply_tx, reply_rx) = crossbeam_channel::bounded(1);
                match tx.send(Command::Close(reply_tx)) {
                    Ok(()) => reply_rx.recv().unwrap_or_else(|_| {
                        Err(self.shared.failure_error().unwrap_or_else(|| {
                            WalError::Failed("the writer thread stopped unexpectedly".into())
                        }))
                    }),
                    Err(_) => Err(self.stopped_error()),
                }
            }
            None => self.shared.failure_error().map_or(Ok(()), Err),
        };
        if let Some(handle) = lock(&self.writer).take() {
            if handle.join().is_err() && result.is_ok() {
                result = Err(WalError::Failed("the writer thread panicked".into()));
            }
        }
        self.shared.queue.close();
        // Retired segments go before the directory lock does.
        lock(&self.reaper).stop();
        lock(&self.dir_lock).take();
        result
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::warn!(error = %e, "write-ahead log dropped after a failure");
        }
    }
}
