//! Group commit, counted: many producers appending at once share `fdatasync`s (far fewer
//! syncs than frames, counted through the [`FileSystem`](sluice_wal::env::FileSystem) seam),
//! and sharing costs nothing in durability: every frame is covered by a completed sync
//! before its producer hears it is durable, and every frame reads back after a reopen.
//!
//! Each producer waits for its frame to be durable before appending the next one, as a
//! Zerobus stream waiting for its ack would, so a batch can only form from producers that
//! arrive while a sync runs. The counting file gives every `fdatasync` a disk-like floor
//! ([`SYNC_FLOOR`]) so the test measures the writer's batching and not how fast this
//! machine's disk happens to sync (a RAM-backed or idle disk syncs in microseconds, and a
//! producer would then rarely find a sync to share).

use std::collections::BTreeMap;
use std::io::{self, IoSlice};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sluice_wal::env::WritableFile;
use sluice_wal::{Lsn, Wal};

use crate::common::{payload, read_all, FRAME_HEADER_LEN, SEGMENT_HEADER_LEN};
use crate::hooked_fs::{FsHooks, Hooked};

/// Concurrent producers.
const PRODUCERS: usize = 64;
/// Frames each producer appends, one at a time.
const FRAMES_EACH: usize = 25;
/// Least time one `fdatasync` takes here (a fast SSD's order of magnitude).
const SYNC_FLOOR: Duration = Duration::from_millis(1);
/// The least mean number of frames one sync must cover. Without group commit it is 1; with
/// 64 producers a batch forms from every producer that arrived during the previous sync.
const MIN_FRAMES_PER_SYNC: f64 = 8.0;

/// Counts segment files created and completed `fdatasync`s, and publishes how far (file
/// offset) the last completed sync covered.
#[derive(Clone, Default)]
struct SyncCounter {
    counters: Arc<Counters>,
}

#[derive(Default)]
struct Counters {
    creates: AtomicU64,
    syncs: AtomicU64,
    /// End offset of the bytes written before the last completed `fdatasync`.
    synced_to: AtomicU64,
}

impl SyncCounter {
    fn syncs(&self) -> u64 {
        self.counters.syncs.load(Ordering::SeqCst)
    }

    fn creates(&self) -> u64 {
        self.counters.creates.load(Ordering::SeqCst)
    }

    fn synced_to(&self) -> u64 {
        self.counters.synced_to.load(Ordering::SeqCst)
    }
}

impl FsHooks for SyncCounter {
    fn wrap(&self, file: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        self.counters.creates.fetch_add(1, Ordering::SeqCst);
        Box::new(CountedFile {
            inner: file,
            written_to: 0,
            counters: Arc::clone(&self.counters),
        })
    }
}

struct CountedFile {
    inner: Box<dyn WritableFile>,
    /// End offset of everything written so far.
    written_to: u64,
    counters: Arc<Counters>,
}

impl WritableFile for CountedFile {
    fn write_vectored_at(&mut self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize> {
        let n = self.inner.write_vectored_at(bufs, offset)?;
        self.written_to = self.written_to.max(offset + n as u64);
        Ok(n)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        std::thread::sleep(SYNC_FLOOR);
        self.inner.sync_data()?;
        self.counters.syncs.fetch_add(1, Ordering::SeqCst);
        self.counters
            .synced_to
            .fetch_max(self.written_to, Ordering::SeqCst);
        Ok(())
    }
}

/// Appends `FRAMES_EACH` frames, each waited for; checks at every ack that a completed
/// sync covers the frame. Returns (end LSN, payload) of each frame.
async fn produce(wal: Wal, fs: SyncCounter, producer: usize) -> Vec<(Lsn, Vec<u8>)> {
    let mut appended = Vec::with_capacity(FRAMES_EACH);
    for seq in 0..FRAMES_EACH {
        let mut p = format!("p{producer:02}-s{seq:03};").into_bytes();
        p.extend_from_slice(&payload(producer * FRAMES_EACH + seq));
        let reservation = wal.reserve(p.len()).await.expect("reserve");
        let end = wal.append(reservation, 1, p.clone()).expect("append");
        wal.wait_durable(end).await.expect("durable");
        // One segment whose base LSN is 0: the frame ends at file offset header + end.
        assert!(
            fs.synced_to() >= SEGMENT_HEADER_LEN + end,
            "producer {producer} frame {seq}: acknowledged as durable up to lsn {end}, \
             but the last completed fdatasync covered only file offset {}",
            fs.synced_to()
        );
        appended.push((end, p));
    }
    appended
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_64_producers_each_waiting_for_durability_then_frames_share_fsyncs_and_every_frame_reads_back(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = SyncCounter::default();
    let (wal, _) = Wal::open_with_fs(
        crate::common::options(dir.path()),
        Arc::new(Hooked(fs.clone())),
    )
    .expect("open");
    let syncs_at_open = fs.syncs();

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|producer| tokio::spawn(produce(wal.clone(), fs.clone(), producer)))
        .collect();
    let mut expected = BTreeMap::new();
    for producer in producers {
        expected.extend(producer.await.expect("producer"));
    }

    let frames = PRODUCERS * FRAMES_EACH;
    let syncs = fs.syncs() - syncs_at_open;
    let per_sync = frames as f64 / syncs as f64;
    println!(
        "group commit: {PRODUCERS} producers x {FRAMES_EACH} frames = {frames} frames, \
         {syncs} fdatasyncs, {per_sync:.1} frames per fdatasync"
    );
    assert_eq!(fs.creates(), 1, "every frame went to the first segment");
    assert!(syncs > 0, "durable frames were synced");
    assert!(
        per_sync >= MIN_FRAMES_PER_SYNC,
        "{frames} frames took {syncs} fdatasyncs ({per_sync:.1} frames per sync): \
         concurrent appends are not sharing syncs"
    );

    // Everything acknowledged reads back after a reopen, once, in LSN order.
    wal.close().expect("close");
    let (wal, recovered) = Wal::open(crate::common::options(dir.path())).expect("reopen");
    let last = *expected.keys().last().expect("frames");
    assert_eq!(recovered.end_lsn, last);
    let read = read_all(&wal, 0);
    assert_eq!(read.len(), frames);
    let mut next = 0;
    for frame in &read {
        assert_eq!(frame.lsn, next, "frames tile the log");
        assert_eq!(
            frame.end_lsn,
            frame.lsn + FRAME_HEADER_LEN + frame.payload.len() as u64
        );
        assert_eq!(expected.get(&frame.end_lsn), Some(&frame.payload));
        next = frame.end_lsn;
    }
}
