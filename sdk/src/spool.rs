//! The offline spool: records accepted by `send` go first to an on-disk log (the `wal`
//! crate: segments of CRC32C frames, group-committed `fdatasync`, torn-tail recovery), and
//! the stream's window is filled from it. A device that loses the network keeps accepting
//! records up to the spool's bound; one that restarts sends what the spool still holds.
//!
//! Layout of `dir`: the WAL's segments, `wal-id` and `LOCK` (one process per spool), and
//! `acked` (decimal LSN: every frame ending at or below it was acked; rewritten by
//! rename). A frame (kind 1) is `u64 LE offset | record bytes`.
//!
//! Bound: `max_bytes` of frames *waiting* (spooled, not yet taken into the in-flight
//! window); the disk also holds the window's records (≤ the in-flight bytes limit) and up
//! to one partly used segment. When the bound is reached, [`WhenFull::Block`] makes `send`
//! wait and [`WhenFull::DropOldest`] drops the oldest waiting records, counted in
//! `sluice_sdk_spool_dropped_records_total` and reported to their ack futures.
//!
//! Damage: a torn tail of the newest segment (a crash mid-write) is cut back to the last
//! good frame at open; any other damage (a bad CRC in an older segment) refuses to open
//! with [`SdkError::Spool`] naming the segment file and byte offset — never silently
//! skipped.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sluice_wal::{Lsn, Reservation, Wal, WalOptions};

use crate::error::{Result, SdkError};

const RECORD_KIND: u8 = 1;
const SEQ_LEN: usize = 8;
/// The WAL's frame header (kind, length, CRC): what a frame costs beyond its payload.
const FRAME_OVERHEAD: u64 = 9;
const ACKED_WRITE_EVERY: Duration = Duration::from_millis(50);

/// What `send` does when the spool is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WhenFull {
    /// Wait until acks free room (back-pressure to the caller). Default.
    #[default]
    Block,
    /// Drop the oldest waiting records, counting them; their ack futures fail with
    /// [`SdkError::Dropped`]. Not allowed on persistent streams (a gap in offsets).
    DropOldest,
}

/// Configures the spool of a stream.
#[derive(Debug, Clone)]
pub struct SpoolOptions {
    /// The spool directory (created if missing).
    pub dir: PathBuf,
    /// Bytes of waiting records before [`SpoolOptions::when_full`] applies. Default: 64 MiB.
    pub max_bytes: u64,
    /// Default: [`WhenFull::Block`].
    pub when_full: WhenFull,
    /// Size of each segment file. Default: `max_bytes / 8`, within 64 KiB..64 MiB.
    pub segment_bytes: Option<u64>,
}

impl SpoolOptions {
    /// A spool in `dir` with the defaults.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        SpoolOptions {
            dir: dir.into(),
            max_bytes: 64 << 20,
            when_full: WhenFull::Block,
            segment_bytes: None,
        }
    }

    /// Sets [`SpoolOptions::max_bytes`].
    pub fn max_bytes(mut self, bytes: u64) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// Sets [`SpoolOptions::when_full`].
    pub fn when_full(mut self, policy: WhenFull) -> Self {
        self.when_full = policy;
        self
    }
}

/// A record read back from the spool.
#[derive(Debug)]
pub struct Spooled {
    /// Its offset.
    pub seq: i64,
    /// Its bytes.
    pub payload: Bytes,
    /// The LSN just past its frame.
    pub lsn_end: Lsn,
}

/// An open spool (see the module doc).
pub struct Spool {
    wal: Wal,
    options: SpoolOptions,
    acked_path: PathBuf,
    /// LSN the next frame ends after (what the last append returned).
    end_lsn: Lsn,
    /// Frames ending at or below it were taken into the window (or dropped).
    read_lsn: Lsn,
    /// Frames ending at or below it were acked.
    acked_lsn: Lsn,
    acked_written: Instant,
    /// The highest offset spooled (at open: found in the frames kept), if any.
    pub last_seq: Option<i64>,
    /// Frames cut off by tail repair at open.
    pub truncated_bytes: u64,
}

impl Spool {
    /// Opens (or creates) the spool, repairing a torn tail; finds the offset of the newest
    /// record still held.
    pub fn open(options: SpoolOptions) -> Result<Spool> {
        if options.max_bytes == 0 {
            return Err(SdkError::Config("spool max_bytes must be > 0".into()));
        }
        std::fs::create_dir_all(&options.dir)
            .map_err(|e| SdkError::Spool(format!("{}: {e}", options.dir.display())))?;
        let mut wal_options = WalOptions::new(&options.dir);
        wal_options.segment_bytes = options
            .segment_bytes
            .unwrap_or((options.max_bytes / 8).clamp(64 << 10, 64 << 20));
        let (wal, recovered) = Wal::open(wal_options)?;
        let acked_path = options.dir.join("acked");
        let acked_lsn = match std::fs::read_to_string(&acked_path) {
            Ok(text) => text.trim().parse::<Lsn>().map_err(|e| {
                SdkError::Spool(format!("{}: not an LSN: {e}", acked_path.display()))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(SdkError::Spool(format!("{}: {e}", acked_path.display()))),
        };
        let read_lsn = acked_lsn.max(recovered.start_lsn);
        let mut last_seq = None;
        for frame in wal.read_from(read_lsn)? {
            let frame = frame?;
            last_seq = Some(decode(&frame.payload, frame.end_lsn)?.0);
        }
        if recovered.truncated_bytes > 0 {
            tracing::warn!(
                dir = %options.dir.display(),
                bytes = recovered.truncated_bytes,
                "spool: cut a torn tail at open"
            );
        }
        Ok(Spool {
            wal,
            acked_path,
            end_lsn: recovered.end_lsn,
            read_lsn,
            acked_lsn: read_lsn,
            acked_written: Instant::now(),
            last_seq,
            truncated_bytes: recovered.truncated_bytes,
            options,
        })
    }

    /// The policy when full.
    pub fn when_full(&self) -> WhenFull {
        self.options.when_full
    }

    /// A handle on the log, to reserve queue space outside the stream's lock.
    pub fn wal(&self) -> Wal {
        self.wal.clone()
    }

    /// What a record of `len` bytes takes in the spool.
    pub fn frame_bytes(len: usize) -> u64 {
        FRAME_OVERHEAD + (SEQ_LEN + len) as u64
    }

    /// The LSN just past the newest frame.
    pub fn end_lsn(&self) -> Lsn {
        self.end_lsn
    }

    /// Bytes of frames waiting (spooled, not yet taken into the window).
    pub fn waiting_bytes(&self) -> u64 {
        self.end_lsn - self.read_lsn
    }

    /// Whether a record of `len` bytes fits under the bound now (an empty spool takes any).
    pub fn has_room(&self, len: usize) -> bool {
        self.waiting_bytes() == 0
            || self.waiting_bytes() + Self::frame_bytes(len) <= self.options.max_bytes
    }

    /// Whether frames wait that are durable (readable) now.
    pub fn readable(&self) -> bool {
        self.wal.durable_lsn() > self.read_lsn
    }

    /// Appends a record (reserved with [`Wal::reserve`]); returns its frame's end LSN.
    pub fn append(&mut self, reservation: Reservation, seq: i64, record: &[u8]) -> Result<Lsn> {
        let mut payload = Vec::with_capacity(SEQ_LEN + record.len());
        payload.extend_from_slice(&seq.to_le_bytes());
        payload.extend_from_slice(record);
        let end = self.wal.append(reservation, RECORD_KIND, payload)?;
        self.end_lsn = end;
        self.last_seq = Some(seq);
        metrics::gauge!("sluice_sdk_spool_bytes").set(self.waiting_bytes() as f64);
        Ok(end)
    }

    /// Takes up to `max_records` durable waiting frames (and, after the first,
    /// `max_bytes`), oldest first.
    pub fn read(&mut self, max_records: usize, max_bytes: usize) -> Result<Vec<Spooled>> {
        let mut out = Vec::new();
        let mut bytes = 0;
        if max_records == 0 || !self.readable() {
            return Ok(out);
        }
        for frame in self.wal.read_from(self.read_lsn)? {
            let frame = frame?;
            let (seq, payload) = decode(&frame.payload, frame.end_lsn)?;
            if !out.is_empty() && bytes + payload.len() > max_bytes {
                break;
            }
            bytes += payload.len();
            self.read_lsn = frame.end_lsn;
            out.push(Spooled {
                seq,
                payload,
                lsn_end: frame.end_lsn,
            });
            if out.len() >= max_records {
                break;
            }
        }
        metrics::gauge!("sluice_sdk_spool_bytes").set(self.waiting_bytes() as f64);
        Ok(out)
    }

    /// Drops the oldest durable waiting frames until a record of `len` bytes fits; returns
    /// the offsets dropped (`[first, last]`) and how many.
    pub fn drop_oldest(&mut self, len: usize) -> Result<Option<(i64, i64, u64)>> {
        let mut dropped: Option<(i64, i64, u64)> = None;
        for frame in self.wal.read_from(self.read_lsn)? {
            if self.has_room(len) {
                break;
            }
            let frame = frame?;
            let (seq, _) = decode(&frame.payload, frame.end_lsn)?;
            self.read_lsn = frame.end_lsn;
            dropped = Some(match dropped {
                None => (seq, seq, 1),
                Some((first, _, n)) => (first, seq, n + 1),
            });
        }
        if let Some((_, _, n)) = dropped {
            metrics::counter!("sluice_sdk_spool_dropped_records_total").increment(n);
            tracing::warn!(
                records = n,
                "spool full: dropped the oldest waiting records"
            );
        }
        Ok(dropped)
    }

    /// Records that every frame ending at or below `lsn` was acked: persisted (at most
    /// every 50 ms, and always with `force`) and whole segments below it deleted.
    pub fn acked(&mut self, lsn: Lsn, force: bool) -> Result<()> {
        self.acked_lsn = self.acked_lsn.max(lsn);
        if !force && self.acked_written.elapsed() < ACKED_WRITE_EVERY {
            return Ok(());
        }
        self.acked_written = Instant::now();
        let tmp = self.options.dir.join("acked.tmp");
        std::fs::write(&tmp, self.acked_lsn.to_string())
            .and_then(|()| std::fs::rename(&tmp, &self.acked_path))
            .map_err(|e| SdkError::Spool(format!("{}: {e}", self.acked_path.display())))?;
        self.wal.purge_below(self.acked_lsn)?;
        Ok(())
    }

    /// Writes and syncs what is queued and releases the directory.
    pub fn close(&mut self) -> Result<()> {
        self.acked(self.acked_lsn, true)?;
        self.wal.close()?;
        Ok(())
    }
}

fn decode(payload: &[u8], end_lsn: Lsn) -> Result<(i64, Bytes)> {
    let Some((seq, record)) = payload.split_first_chunk::<SEQ_LEN>() else {
        return Err(SdkError::Spool(format!(
            "frame ending at LSN {end_lsn} holds {} bytes, less than its offset",
            payload.len()
        )));
    };
    Ok((i64::from_le_bytes(*seq), Bytes::copy_from_slice(record)))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn put(spool: &mut Spool, seq: i64, record: &[u8]) -> Lsn {
        let r = spool.wal().reserve(record.len()).await.expect("reserve");
        spool.append(r, seq, record).expect("append")
    }

    async fn durable(spool: &Spool, lsn: Lsn) {
        spool.wal().wait_durable(lsn).await.expect("durable");
    }

    fn small(dir: &std::path::Path) -> SpoolOptions {
        SpoolOptions {
            dir: dir.to_path_buf(),
            max_bytes: 1 << 20,
            when_full: WhenFull::Block,
            segment_bytes: Some(4096),
        }
    }

    #[tokio::test]
    async fn records_survive_a_reopen_and_acked_ones_are_not_read_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut spool = Spool::open(small(dir.path())).expect("open");
        let mut ends = Vec::new();
        for seq in 0..100 {
            ends.push(put(&mut spool, seq, format!("record-{seq}").as_bytes()).await);
        }
        durable(&spool, ends[99]).await;
        let first = spool.read(10, usize::MAX).expect("read");
        assert_eq!(
            first.iter().map(|s| s.seq).collect::<Vec<_>>(),
            (0..10).collect::<Vec<_>>()
        );
        assert_eq!(&first[3].payload[..], b"record-3");
        spool.acked(ends[4], true).expect("acked");
        spool.close().expect("close");
        drop(spool);

        let mut spool = Spool::open(small(dir.path())).expect("reopen");
        assert_eq!(spool.last_seq, Some(99));
        let again = spool.read(1000, usize::MAX).expect("read");
        assert_eq!(again.first().map(|s| s.seq), Some(5), "0..=4 were acked");
        assert_eq!(again.len(), 95);
        // Acking everything deletes every segment but the active one.
        spool.acked(ends[99], true).expect("acked");
        let segments = std::fs::read_dir(dir.path())
            .expect("ls")
            .filter(|e| {
                e.as_ref()
                    .map(|e| e.file_name().to_string_lossy().ends_with(".wal"))
                    .unwrap_or(false)
            })
            .count();
        assert!(segments <= 1, "{segments} segments left");
    }

    #[tokio::test]
    async fn the_bound_counts_waiting_bytes_and_drop_oldest_frees_room() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut opts = small(dir.path());
        opts.max_bytes = Spool::frame_bytes(100) * 5;
        opts.when_full = WhenFull::DropOldest;
        let mut spool = Spool::open(opts).expect("open");
        let record = [7u8; 100];
        let mut last = 0;
        for seq in 0..5 {
            assert!(spool.has_room(100));
            last = put(&mut spool, seq, &record).await;
        }
        assert!(!spool.has_room(100), "five records fill it");
        durable(&spool, last).await;
        let dropped = spool.drop_oldest(100).expect("drop");
        assert_eq!(dropped, Some((0, 0, 1)));
        assert!(spool.has_room(100));
        let rest: Vec<i64> = spool
            .read(10, usize::MAX)
            .expect("read")
            .iter()
            .map(|s| s.seq)
            .collect();
        assert_eq!(rest, [1, 2, 3, 4]);
    }

    /// Spools `n` copies of `record` into `dir`, waits until they are durable, closes the
    /// spool and returns its segment files, oldest first.
    async fn spooled_and_closed(dir: &std::path::Path, n: i64, record: &[u8]) -> Vec<PathBuf> {
        let mut spool = Spool::open(small(dir)).expect("open");
        let mut last = 0;
        for seq in 0..n {
            last = put(&mut spool, seq, record).await;
        }
        durable(&spool, last).await;
        spool.close().expect("close");
        drop(spool);
        let mut segments: Vec<PathBuf> = std::fs::read_dir(dir)
            .expect("ls")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.to_string_lossy().ends_with(".wal"))
            .collect();
        segments.sort();
        segments
    }

    #[tokio::test]
    async fn a_corrupted_older_segment_refuses_to_open_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let segments = spooled_and_closed(dir.path(), 200, &[b'a'; 64]).await;
        assert!(segments.len() >= 3, "{segments:?}");
        // Flip one byte in the middle of the first (not newest) segment.
        let victim = &segments[0];
        let mut bytes = std::fs::read(victim).expect("read segment");
        bytes[1000] ^= 0xff;
        std::fs::write(victim, bytes).expect("write segment");
        let err = Spool::open(small(dir.path())).err().expect("refused");
        let text = err.to_string();
        assert!(matches!(err, SdkError::Spool(_)), "{text}");
        let name = victim
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        assert!(text.contains(&name), "{text}");
    }

    #[tokio::test]
    async fn a_torn_tail_is_cut_and_the_records_before_it_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let segments = spooled_and_closed(dir.path(), 10, &[b'b'; 32]).await;
        let newest = segments.last().expect("a segment");
        let mut bytes = std::fs::read(newest).expect("read");
        // The last frame's final byte (frames follow a header; 10 frames of 9 + 40 bytes).
        let tail = bytes.len() - bytes.iter().rev().take_while(|b| **b == 0).count() - 1;
        bytes[tail] ^= 0xff;
        std::fs::write(newest, bytes).expect("write");
        let mut spool = Spool::open(small(dir.path())).expect("tail repaired");
        assert!(spool.truncated_bytes > 0);
        let seqs: Vec<i64> = spool
            .read(100, usize::MAX)
            .expect("read")
            .iter()
            .map(|s| s.seq)
            .collect();
        assert_eq!(
            seqs,
            (0..9).collect::<Vec<_>>(),
            "the torn last record is cut"
        );
    }
}
