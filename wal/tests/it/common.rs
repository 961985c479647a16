//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};

use sluice_wal::{Frame, Lsn, Recovered, Wal, WalOptions};

pub const SEGMENT_HEADER_LEN: u64 = 36;
pub const FRAME_HEADER_LEN: u64 = 9;

/// Whether this run writes segments through `O_DIRECT`: the test command runs the suites
/// once buffered and once with `SLUICE_WAL_DIRECT_IO=1`.
pub fn direct_io() -> bool {
    std::env::var_os("SLUICE_WAL_DIRECT_IO").is_some_and(|v| v == "1")
}

/// Default options, direct or buffered as [`direct_io`].
pub fn options(dir: impl Into<PathBuf>) -> WalOptions {
    let mut opts = WalOptions::new(dir);
    opts.direct_io = direct_io();
    opts
}

/// Options with small segments so that tests rotate (direct or buffered as [`direct_io`]).
pub fn small_segments(dir: &Path) -> WalOptions {
    let mut opts = options(dir);
    opts.segment_bytes = 4096;
    opts
}

pub fn open(opts: WalOptions) -> (Wal, Recovered) {
    Wal::open(opts).expect("open the log")
}

/// A payload that says which record it is and varies in length.
pub fn payload(i: usize) -> Vec<u8> {
    format!("record-{i:05};").repeat(i % 7 + 1).into_bytes()
}

/// Reserves, appends and returns the end LSN.
pub async fn append(wal: &Wal, kind: u8, payload: Vec<u8>) -> Lsn {
    let reservation = wal.reserve(payload.len()).await.expect("reserve");
    wal.append(reservation, kind, payload).expect("append")
}

/// Appends `payload(i)` for every i in `range`, waits until durable, returns the frames as
/// the log should hold them.
pub async fn append_many(wal: &Wal, range: std::ops::Range<usize>) -> Vec<Frame> {
    let mut frames = Vec::new();
    for i in range {
        let p = payload(i);
        let end_lsn = append(wal, (i % 3) as u8 + 1, p.clone()).await;
        frames.push(Frame {
            lsn: end_lsn - FRAME_HEADER_LEN - p.len() as u64,
            end_lsn,
            kind: (i % 3) as u8 + 1,
            payload: p,
        });
    }
    if let Some(last) = frames.last() {
        wal.wait_durable(last.end_lsn).await.expect("durable");
    }
    frames
}

pub fn read_all(wal: &Wal, from: Lsn) -> Vec<Frame> {
    wal.read_from(from)
        .expect("read_from")
        .collect::<Result<Vec<_>, _>>()
        .expect("every frame reads back")
}

/// Segment files in base LSN order.
pub fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    files.sort();
    files
}

/// Base LSN from a segment file name.
pub fn base_lsn(path: &Path) -> Lsn {
    path.file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .expect("segment file name is a base lsn")
}

/// The segment file holding the frame that starts at `lsn`.
pub fn segment_holding(dir: &Path, lsn: Lsn) -> PathBuf {
    segment_files(dir)
        .into_iter()
        .rev()
        .find(|p| base_lsn(p) <= lsn)
        .expect("a segment holds the lsn")
}

/// File offset of the frame starting at `lsn` in the segment at `path`.
pub fn offset_of(path: &Path, lsn: Lsn) -> u64 {
    SEGMENT_HEADER_LEN + (lsn - base_lsn(path))
}

/// Overwrites bytes of a file in place.
pub fn write_at(path: &Path, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open for damage");
    file.write_all_at(bytes, offset).expect("write damage");
}

pub fn flip_byte(path: &Path, offset: u64) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open for damage");
    let mut b = [0u8; 1];
    file.read_exact_at(&mut b, offset).expect("read byte");
    b[0] ^= 0x5a;
    file.write_all_at(&b, offset).expect("write byte");
}

pub fn truncate(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open for truncation")
        .set_len(len)
        .expect("truncate");
}

/// Bytes that never form a valid frame here: pseudo-random, non-zero.
pub fn garbage(len: usize) -> Vec<u8> {
    let mut x: u32 = 0x9e37_79b9;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x as u8) | 1
        })
        .collect()
}
