//! The producer's handle: [`StreamBuilder`] (format, persistence, limits, spool) and
//! [`Stream`] (`send`, `try_send`, `flush`, `close`). The handle only admits records into
//! the shared state ([`Shared`]); a background task (`driver`) owns the connection.
//!
//! Back-pressure: without a spool, `send` waits while the in-flight ledger holds
//! `max_inflight_records` records or `max_inflight_bytes` bytes; with a spool, records go
//! to disk first and `send` waits (or drops the oldest, see [`WhenFull`]) only when the
//! spool's bound is reached. `try_send` never waits: [`SdkError::Full`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::FutureExt;
use prost::Message;
use tokio::sync::{oneshot, watch, Notify};
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::acks::{AckFuture, AckState};
use crate::client::Client;
use crate::driver;
use crate::error::{Result, SdkError};
use crate::ledger::{Entry, Ledger};
use crate::plan::Plan;
pub use crate::shared::AckCallback;
use crate::shared::{Limits, Persist, Shared, State};
use crate::spool::{Spool, SpoolOptions, WhenFull};
use crate::state_file;
use crate::wire::Format;

impl Client {
    /// Starts a stream to `table` (`catalog.schema.table`): JSON and ephemeral unless
    /// the builder says otherwise.
    pub fn stream(&self, table: impl Into<String>) -> StreamBuilder {
        StreamBuilder::new(self.clone(), table.into())
    }
}

/// Configures and opens a stream (from [`Client::stream`]).
#[derive(Clone)]
pub struct StreamBuilder {
    client: Client,
    table: String,
    format: Format,
    persistent: Option<PathBuf>,
    limits: Limits,
    spool: Option<SpoolOptions>,
    open_timeout: Duration,
    on_ack: Option<AckCallback>,
}

impl StreamBuilder {
    pub(crate) fn new(client: Client, table: String) -> Self {
        StreamBuilder {
            client,
            table,
            format: Format::Json,
            persistent: None,
            limits: Limits {
                max_records: 50_000,
                max_bytes: 64 << 20,
                batch_records: 1_000,
                batch_bytes: 1 << 20,
            },
            spool: None,
            open_timeout: Duration::from_secs(30),
            on_ack: None,
        }
    }

    /// Records are JSON objects (the default).
    pub fn json(mut self) -> Self {
        self.format = Format::Json;
        self
    }

    /// Records are protobuf messages described by `descriptor`.
    pub fn proto(mut self, descriptor: &prost_types::DescriptorProto) -> Self {
        self.format = Format::Proto(Bytes::from(descriptor.encode_to_vec()));
        self
    }

    /// Exactly-once: a persistent stream whose id and last acked offset live in
    /// `state_file`. A later process with the same file resumes the same stream at the
    /// server's watermark ([`Stream::next_offset`]); resent records at or below it are
    /// dropped by the server.
    pub fn persistent(mut self, state_file: impl Into<PathBuf>) -> Self {
        self.persistent = Some(state_file.into());
        self
    }

    /// At most this many records unacked in memory. Default: 50 000.
    pub fn max_inflight_records(mut self, n: usize) -> Self {
        self.limits.max_records = n.max(1);
        self
    }

    /// At most this many payload bytes unacked in memory (a single larger record is
    /// still admitted alone). Default: 64 MiB.
    pub fn max_inflight_bytes(mut self, n: usize) -> Self {
        self.limits.max_bytes = n.max(1);
        self
    }

    /// Records per request. Default: 1 000 records or 1 MiB. A persistent stream keeps
    /// its requests' records fixed across resends ([`crate::plan`]): it sends full
    /// requests (at most a quarter of the in-flight limit), or a shorter one after the
    /// producer paused 10 ms, at a byte limit or at close (then the state file is saved
    /// before the request goes).
    pub fn batch(mut self, records: usize, bytes: usize) -> Self {
        self.limits.batch_records = records.max(1);
        self.limits.batch_bytes = bytes.max(1);
        self
    }

    /// Spool records on disk first (see [`crate::spool`]).
    pub fn spool(mut self, options: SpoolOptions) -> Self {
        self.spool = Some(options);
        self
    }

    /// How long [`StreamBuilder::open`] waits for the first connection. Zero: return at
    /// once and connect in the background (a device starting offline; errors then reach
    /// the ack futures). Default: 30 s.
    pub fn open_timeout(mut self, timeout: Duration) -> Self {
        self.open_timeout = timeout;
        self
    }

    /// Calls `callback` with the highest acked offset after each ack (from the
    /// connection task, without the stream's lock held: keep it short).
    pub fn on_ack(mut self, callback: impl Fn(i64) + Send + Sync + 'static) -> Self {
        self.on_ack = Some(Arc::new(callback));
        self
    }

    /// The client and table (an Arrow stream takes them over).
    pub(crate) fn into_parts(self) -> (Client, String) {
        (self.client, self.table)
    }

    /// The same stream with `suffix` added to its state file and spool directory (so each
    /// stream of a pool keeps its own).
    pub(crate) fn suffixed(mut self, suffix: &str) -> Self {
        if let Some(p) = self.persistent.take() {
            let mut name = p.into_os_string();
            name.push(suffix);
            self.persistent = Some(PathBuf::from(name));
        }
        if let Some(spool) = self.spool.as_mut() {
            spool.dir = spool.dir.join(suffix.trim_start_matches('.'));
        }
        self
    }

    /// Opens the stream: reads the state file and the spool, starts the connection task
    /// and waits for the first connection (see [`StreamBuilder::open_timeout`]).
    pub async fn open(self) -> Result<Stream> {
        let spool = match self.spool {
            Some(options) => {
                if self.persistent.is_some() && options.when_full == WhenFull::DropOldest {
                    return Err(SdkError::Config(
                        "a persistent stream cannot drop records (its offsets must not have gaps): use WhenFull::Block".into(),
                    ));
                }
                Some(Spool::open(options)?)
            }
            None => None,
        };
        let persist = match &self.persistent {
            Some(path) => {
                let saved = state_file::load(path)?;
                if let Some(s) = &saved {
                    if s.table != self.table {
                        return Err(SdkError::State {
                            path: path.display().to_string(),
                            message: format!(
                                "holds a stream of table `{}`, not `{}`",
                                s.table, self.table
                            ),
                        });
                    }
                }
                let plan = match &saved {
                    Some(s) => s.plan().map_err(|message| SdkError::State {
                        path: path.display().to_string(),
                        message,
                    })?,
                    None => Plan::new(-1, -1, self.limits.persistent_batch()),
                };
                Some(Persist {
                    path: path.clone(),
                    stream_id: saved.as_ref().map(|s| s.stream_id.clone()),
                    watermark: saved.map_or(-1, |s| s.watermark),
                    saved: Instant::now(),
                    next_wire: plan.last_cut_wire() + 1,
                    plan,
                })
            }
            None => None,
        };
        let next_seq = persist
            .as_ref()
            .map_or(0, |p| p.watermark + 1)
            .max(spool.as_ref().and_then(|s| s.last_seq).map_or(0, |s| s + 1));
        let (acks, _) = watch::channel(AckState::starting_at(next_seq));
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                ledger: Ledger::with_capacity(self.limits.max_records.min(1 << 20)),
                next_seq,
                closing: false,
                failed: None,
                spool,
                persist,
            }),
            room: Notify::new(),
            work: Notify::new(),
            acks,
            limits: self.limits,
            table: self.table.clone(),
            format: self.format,
            on_ack: self.on_ack,
        });
        let (opened_tx, opened_rx) = oneshot::channel();
        let span = tracing::info_span!("sluice_stream", table = %self.table);
        let task =
            tokio::spawn(driver::run(Arc::clone(&shared), self.client, opened_tx).instrument(span));
        let stream = Stream {
            shared,
            task: Some(task),
        };
        if !self.open_timeout.is_zero() {
            match tokio::time::timeout(self.open_timeout, opened_rx).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => return Err(e),
                Ok(Err(_)) => return Err(SdkError::Closed),
                Err(_) => {
                    return Err(SdkError::Unavailable(format!(
                        "no connection to {} within {:?}",
                        stream.table(),
                        self.open_timeout
                    )))
                }
            }
        }
        Ok(stream)
    }
}

/// An open stream (see the module doc). Dropping it without [`Stream::close`] stops the
/// connection task; unacked records are then lost unless spooled.
pub struct Stream {
    shared: Arc<Shared>,
    task: Option<JoinHandle<()>>,
}

enum Admit {
    Done(AckFuture),
    Wait,
    Spool(sluice_wal::Wal),
    DropOldest(sluice_wal::Wal, u64),
}

impl Stream {
    /// The table.
    pub fn table(&self) -> &str {
        &self.shared.table
    }

    /// The offset the next `send` gets. On a resumed persistent stream: the server's
    /// watermark + 1, so a producer replaying its input skips the records before it.
    pub fn next_offset(&self) -> i64 {
        self.shared.lock().next_seq
    }

    /// A persistent stream's durable id (once created).
    pub fn stream_id(&self) -> Option<String> {
        self.shared
            .lock()
            .persist
            .as_ref()
            .and_then(|p| p.stream_id.clone())
    }

    /// Bytes waiting in the spool (0 without one).
    pub fn spool_waiting_bytes(&self) -> u64 {
        self.shared
            .lock()
            .spool
            .as_ref()
            .map_or(0, |s| s.waiting_bytes())
    }

    /// Waits until every record spooled so far is on stable storage (`fdatasync`'d): a
    /// device about to power off calls it, and its next start sends them.
    pub async fn spool_sync(&self) -> Result<()> {
        let pending = self
            .shared
            .lock()
            .spool
            .as_ref()
            .map(|s| (s.wal(), s.end_lsn()));
        if let Some((wal, end)) = pending {
            wal.wait_durable(end).await?;
        }
        Ok(())
    }

    /// The highest offset acked so far.
    pub fn acked_offset(&self) -> i64 {
        self.shared.acks.borrow().acked
    }

    /// Admits one record, waiting while the stream is full; the returned future completes
    /// when the server acked it.
    pub async fn send(&self, record: impl Into<Bytes>) -> Result<AckFuture> {
        let record = self.check(record.into())?;
        loop {
            let room = self.shared.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            match self.admit(&record)? {
                Admit::Done(ack) => return Ok(ack),
                Admit::Wait => room.await,
                Admit::Spool(wal) => {
                    let reservation = wal.reserve(record.len()).await?;
                    return self.spool_append(reservation, &record);
                }
                Admit::DropOldest(wal, end) => {
                    wal.wait_durable(end).await?;
                    self.drop_oldest(record.len())?;
                }
            }
        }
    }

    /// Admits one record if there is room now, else [`SdkError::Full`].
    pub fn try_send(&self, record: impl Into<Bytes>) -> Result<AckFuture> {
        let record = self.check(record.into())?;
        match self.admit(&record)? {
            Admit::Done(ack) => Ok(ack),
            Admit::Wait | Admit::DropOldest(..) => Err(SdkError::Full),
            Admit::Spool(wal) => match wal.reserve(record.len()).now_or_never() {
                Some(reservation) => self.spool_append(reservation?, &record),
                None => Err(SdkError::Full),
            },
        }
    }

    fn check(&self, record: Bytes) -> Result<Bytes> {
        if matches!(self.shared.format, Format::Json) && std::str::from_utf8(&record).is_err() {
            return Err(SdkError::InvalidRecord(format!(
                "a JSON record must be UTF-8 text (offset would have been {})",
                self.next_offset()
            )));
        }
        Ok(record)
    }

    fn admit(&self, record: &Bytes) -> Result<Admit> {
        let mut st = self.shared.lock();
        if let Some(e) = &st.failed {
            return Err(e.clone());
        }
        if st.closing {
            return Err(SdkError::Closed);
        }
        if let Some(spool) = &st.spool {
            return Ok(if spool.has_room(record.len()) {
                Admit::Spool(spool.wal())
            } else if spool.when_full() == WhenFull::DropOldest {
                Admit::DropOldest(spool.wal(), spool.end_lsn())
            } else {
                Admit::Wait
            });
        }
        let limits = &self.shared.limits;
        let fits = st.ledger.is_empty()
            || (st.ledger.len() < limits.max_records
                && st.ledger.bytes() + record.len() <= limits.max_bytes);
        if !fits {
            return Ok(Admit::Wait);
        }
        let seq = st.next_seq;
        st.next_seq += 1;
        st.ledger.push(Entry {
            seq,
            wire: crate::ledger::UNASSIGNED,
            payload: record.clone(),
            queued: Instant::now(),
            lsn_end: 0,
        });
        drop(st);
        self.shared.work.notify_one();
        Ok(Admit::Done(AckFuture::new(
            seq,
            self.shared.acks.subscribe(),
        )))
    }

    fn spool_append(
        &self,
        reservation: sluice_wal::Reservation,
        record: &Bytes,
    ) -> Result<AckFuture> {
        let mut st = self.shared.lock();
        if st.closing {
            return Err(SdkError::Closed);
        }
        let seq = st.next_seq;
        let Some(spool) = st.spool.as_mut() else {
            return Err(SdkError::Spool("the spool is closed".into()));
        };
        spool.append(reservation, seq, record)?;
        st.next_seq += 1;
        drop(st);
        self.shared.work.notify_one();
        Ok(AckFuture::new(seq, self.shared.acks.subscribe()))
    }

    fn drop_oldest(&self, len: usize) -> Result<()> {
        let mut st = self.shared.lock();
        let Some(spool) = st.spool.as_mut() else {
            return Ok(());
        };
        if let Some((first, last, _)) = spool.drop_oldest(len)? {
            self.shared.acks.send_modify(|s| {
                let mut ranges = (*s.dropped).clone();
                match ranges.last_mut() {
                    Some(r) if r.1 + 1 >= first => r.1 = last,
                    _ => ranges.push((first, last)),
                }
                s.dropped = Arc::new(ranges);
            });
        }
        Ok(())
    }

    /// Waits until every record sent before the call is acked (dropped records count as
    /// done; the error that ended the stream is returned).
    pub async fn flush(&self) -> Result<()> {
        let last = self.next_offset() - 1;
        if last < 0 {
            return Ok(());
        }
        match AckFuture::new(last, self.shared.acks.subscribe()).await {
            Ok(_) | Err(SdkError::Dropped(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Flushes, then ends the connection (a persistent stream is not retired: its state
    /// file keeps the id for the next process) and closes the spool.
    pub async fn close(mut self) -> Result<()> {
        let flushed = self.flush().await;
        self.shared.lock().closing = true;
        self.shared.work.notify_one();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        flushed?;
        match self.shared.lock().failed.clone() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> Client {
        // Nothing listens there: these refusals come before any connection.
        Client::builder("http://127.0.0.1:9")
            .build()
            .expect("client")
    }

    #[tokio::test]
    async fn a_persistent_stream_refuses_a_dropping_spool() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spool = SpoolOptions::new(dir.path().join("spool")).when_full(WhenFull::DropOldest);
        let err = client()
            .stream("main.a.b")
            .persistent(dir.path().join("s.json"))
            .spool(spool)
            .open()
            .await
            .err()
            .expect("refused");
        assert!(
            matches!(&err, SdkError::Config(m) if m.contains("gaps")),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_state_file_of_another_table_is_refused_naming_both() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.json");
        state_file::save(
            &path,
            &state_file::PersistentState {
                stream_id: "id".into(),
                table: "main.a.other".into(),
                watermark: 3,
                cuts: Vec::new(),
            },
        )
        .expect("save");
        let err = client()
            .stream("main.a.b")
            .persistent(&path)
            .open()
            .await
            .err()
            .expect("refused");
        let text = err.to_string();
        assert!(
            text.contains("main.a.other") && text.contains("main.a.b"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn try_send_says_full_at_the_in_flight_limit_and_json_must_be_utf8() {
        let stream = client()
            .stream("main.a.b")
            .max_inflight_records(2)
            .open_timeout(Duration::ZERO)
            .open()
            .await
            .expect("open without waiting");
        assert!(matches!(
            stream.try_send(vec![0xff, 0xfe]),
            Err(SdkError::InvalidRecord(_))
        ));
        assert_eq!(stream.try_send("{}").map(|a| a.offset()).ok(), Some(0));
        assert_eq!(stream.try_send("{}").map(|a| a.offset()).ok(), Some(1));
        assert!(matches!(stream.try_send("{}"), Err(SdkError::Full)));
        assert!(
            tokio::time::timeout(Duration::from_millis(100), stream.send("{}"))
                .await
                .is_err(),
            "send waits while full"
        );
    }
}
