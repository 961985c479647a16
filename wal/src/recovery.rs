//! Recovery, run by [`crate::Wal::open`] before the writer starts: decide, by policy, what
//! of the directory is the log, and where the next frame goes.
//!
//! Segments are scanned in base LSN order; every header and every frame CRC is checked.
//!
//! # What a crash can leave behind
//!
//! The writer syncs every batch before it publishes it and before it gathers the next one,
//! and it syncs a segment before it creates the next one (see `writer`). So after a crash,
//! the only bytes that may differ from what was written are those of the **last batch**,
//! which was never synced and never acknowledged, and it lies at the end of the newest
//! segment. The kernel writes that batch's dirty pages back in any order, so it can come
//! back torn anywhere: cut short, with a bad early frame and a good later one, or with
//! garbage where a frame should be. A batch spans at most [`MAX_BATCH_BYTES`] of frame
//! starts: every frame of it starts less than `MAX_BATCH_BYTES` after its first frame.
//!
//! # The policy
//!
//! - A segment that is not the newest must hold frames up to exactly the next segment's
//!   base LSN, followed only by zeros. Anything else (a bad frame, garbage after the last
//!   frame, a gap or overlap between segments, a bad header) is [`WalError::Corrupt`] in
//!   every mode: those bytes were synced before the next segment was created, so damage
//!   there is not a crash artefact.
//! - In the newest segment, let `stop` be the first bad or partial frame (or non-zero bytes
//!   after the end marker). If every valid-looking frame after `stop` starts less than
//!   `MAX_BATCH_BYTES` after it, the damage fits inside one unsynced batch: a **torn tail**.
//!   [`RecoveryMode::TolerateTailCorruption`] cuts the file back to `stop` (`ftruncate` +
//!   fsync), dropping the later frames too (they belong to the same unacknowledged batch,
//!   and keeping them would leave a hole in the log), and reports the cut bytes;
//!   [`RecoveryMode::AbsoluteConsistency`] refuses. If a valid frame starts further away,
//!   the damage is in the middle of data that was synced: Corrupt in both modes.
//! - A newest segment whose header is torn and whose body is all zero was never written to
//!   (a crash while creating it): removed in tolerate mode, Corrupt otherwise. A torn header
//!   in front of written data is Corrupt in both modes.
//!
//! The price of tolerance: bit rot within `MAX_BATCH_BYTES` before the end of the newest
//! segment is indistinguishable from a torn batch and is cut, not reported. Operators who
//! would rather stop and look choose `AbsoluteConsistency`. With
//! [`crate::Durability::UnsafeNoSync`] many batches may be unsynced at a crash; damage
//! beyond the last one makes `open` refuse (that mode promises nothing after a power loss).
//!
//! Recovery never prepares a segment for appending: the writer always starts a brand-new
//! segment at `end_lsn`, so no byte from an earlier life of a file can reappear as data.

use std::path::{Path, PathBuf};

use crate::env::FileSystem;
use crate::error::{Result, WalError};
use crate::format::{
    decode_frame, Decoded, SegmentHeader, FRAME_HEADER_LEN, MAX_BATCH_BYTES, SEGMENT_HEADER_LEN,
};
use crate::fs;
use crate::lsn::Lsn;
use crate::options::RecoveryMode;
use crate::segment::{list_segments, SegmentMeta};

/// What [`crate::Wal::open`] found on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovered {
    /// First LSN still on disk (the base of the oldest segment kept).
    pub start_lsn: Lsn,
    /// LSN the next appended frame starts at.
    pub end_lsn: Lsn,
    /// Segment files found at open, before any repair.
    pub segments: usize,
    /// Bytes cut off (or removed with a torn-header segment) by tail repair.
    pub truncated_bytes: u64,
}

/// Recovery's result for the rest of `open`.
pub(crate) struct Outcome {
    pub recovered: Recovered,
    /// The segments kept, in base LSN order.
    pub segments: Vec<SegmentMeta>,
    /// Id for the next segment created.
    pub next_segment_id: u64,
}

/// The previous segment scanned, to check that the next one continues it.
struct Previous {
    path: PathBuf,
    segment_id: u64,
    end_lsn: Lsn,
    end_offset: u64,
}

pub(crate) fn recover(env: &dyn FileSystem, dir: &Path, mode: RecoveryMode) -> Result<Outcome> {
    let listed = list_segments(env, dir)?;
    let mut kept = Vec::with_capacity(listed.len());
    let mut truncated_bytes = 0;
    let mut next_segment_id = 0;
    let mut end_lsn = listed.first().map_or(0, |s| s.base_lsn);
    let mut previous: Option<Previous> = None;

    for (i, meta) in listed.iter().enumerate() {
        let newest = i + 1 == listed.len();
        let path = &meta.path;
        let data = fs::read_file(env, path)?;
        let header = match SegmentHeader::decode(&data) {
            Ok(header) => header,
            Err(reason) => {
                let body_unwritten = data
                    .get(SEGMENT_HEADER_LEN..)
                    .is_none_or(|body| first_non_zero(body).is_none());
                if newest && body_unwritten && mode == RecoveryMode::TolerateTailCorruption {
                    tracing::warn!(segment = %path.display(), %reason,
                        "removing the newest segment: its header is torn and nothing was written to it");
                    fs::remove_file(env, path)?;
                    fs::sync_dir(env, dir)?;
                    truncated_bytes += data.len() as u64;
                    continue;
                }
                return Err(WalError::corrupt(path, 0, reason));
            }
        };
        if header.base_lsn != meta.base_lsn {
            return Err(WalError::corrupt(
                path,
                24,
                format!(
                    "header says base lsn {} but the file name says {}",
                    header.base_lsn, meta.base_lsn
                ),
            ));
        }
        if let Some(prev) = &previous {
            if header.segment_id <= prev.segment_id {
                return Err(WalError::corrupt(
                    path,
                    16,
                    format!(
                        "segment id {} does not follow the previous segment's id {}",
                        header.segment_id, prev.segment_id
                    ),
                ));
            }
            if meta.base_lsn != prev.end_lsn {
                return Err(WalError::corrupt(
                    &prev.path,
                    prev.end_offset,
                    format!(
                        "frames end at lsn {} but the next segment {} starts at lsn {}",
                        prev.end_lsn,
                        path.display(),
                        meta.base_lsn
                    ),
                ));
            }
        }

        let scan = scan_frames(&data, meta.base_lsn);
        let stop = scan.end_offset;
        let trailing = first_non_zero(&data[stop..]).map(|at| stop + at);
        let damage = match (scan.invalid, trailing) {
            (Some(reason), _) => Some(reason),
            (None, Some(at)) => Some(format!(
                "non-zero bytes at offset {at} after the last frame"
            )),
            (None, None) => None,
        };
        if let Some(reason) = damage {
            if !newest {
                return Err(WalError::corrupt(path, stop as u64, reason));
            }
            // Frames starting within one batch of `stop` are cut with it; only a valid
            // frame further away proves the damage is in synced data.
            let beyond_batch = stop.saturating_add(MAX_BATCH_BYTES as usize);
            match find_valid_frame(&data, beyond_batch, meta.base_lsn) {
                Probe::Found(at) => {
                    return Err(WalError::corrupt(
                        path,
                        stop as u64,
                        format!(
                            "{reason}, yet a valid frame follows at offset {at}, \
                             beyond what one unsynced batch can span"
                        ),
                    ));
                }
                Probe::GaveUp(at) => {
                    return Err(WalError::corrupt(
                        path,
                        stop as u64,
                        format!(
                            "{reason}; non-zero data follows more than one batch later \
                             (probing for frames gave up at offset {at})"
                        ),
                    ));
                }
                Probe::NotFound => {}
            }
            if mode == RecoveryMode::AbsoluteConsistency {
                return Err(WalError::corrupt(
                    path,
                    stop as u64,
                    format!("torn tail: {reason}"),
                ));
            }
            let cut = (data.len() - stop) as u64;
            tracing::warn!(segment = %path.display(), offset = stop, cut, %reason,
                "cutting a torn tail back to the last good frame");
            fs::truncate(env, path, stop as u64)?;
            truncated_bytes += cut;
        }

        end_lsn = scan.end_lsn;
        next_segment_id = header.segment_id + 1;
        previous = Some(Previous {
            path: path.clone(),
            segment_id: header.segment_id,
            end_lsn: scan.end_lsn,
            end_offset: stop as u64,
        });
        kept.push(meta.clone());
    }

    let recovered = Recovered {
        start_lsn: kept.first().map_or(end_lsn, |s| s.base_lsn),
        end_lsn,
        segments: listed.len(),
        truncated_bytes,
    };
    tracing::info!(dir = %dir.display(), ?recovered, "recovered write-ahead log");
    Ok(Outcome {
        recovered,
        segments: kept,
        next_segment_id,
    })
}

/// Where the valid frames of one segment stop.
struct Scan {
    /// File offset just past the last valid frame.
    end_offset: usize,
    /// LSN just past the last valid frame.
    end_lsn: Lsn,
    /// Why scanning stopped, unless it stopped at the end marker.
    invalid: Option<String>,
}

fn scan_frames(data: &[u8], base_lsn: Lsn) -> Scan {
    let mut offset = SEGMENT_HEADER_LEN;
    let mut lsn = base_lsn;
    loop {
        match decode_frame(&data[offset..], lsn) {
            Decoded::Frame { payload, .. } => {
                let len = FRAME_HEADER_LEN + payload.len();
                offset += len;
                lsn += len as u64;
            }
            Decoded::End => {
                return Scan {
                    end_offset: offset,
                    end_lsn: lsn,
                    invalid: None,
                }
            }
            Decoded::Invalid(reason) => {
                return Scan {
                    end_offset: offset,
                    end_lsn: lsn,
                    invalid: Some(reason.to_string()),
                }
            }
        }
    }
}

/// Bytes of CRC work a probe may spend before it gives up (a garbage header can claim a
/// long payload, and every byte position is a candidate).
const PROBE_BUDGET_BYTES: u64 = 1 << 30;

/// Outcome of probing for a valid frame.
enum Probe {
    Found(usize),
    NotFound,
    /// The CRC budget ran out at this offset: undecided.
    GaveUp(usize),
}

/// Offset of the first valid frame at or after `from`, probing every byte position (the
/// CRC covers the LSN, so a frame only validates where it was written). Zero runs are
/// skipped: a frame header always has a non-zero byte.
fn find_valid_frame(data: &[u8], from: usize, base_lsn: Lsn) -> Probe {
    let mut at = from;
    let mut spent: u64 = 0;
    while at + FRAME_HEADER_LEN <= data.len() {
        let Some(non_zero) = first_non_zero(&data[at..]) else {
            return Probe::NotFound;
        };
        // A header containing the byte at `non_zero` starts at most 8 bytes before it.
        at = at.max((at + non_zero).saturating_sub(FRAME_HEADER_LEN - 1));
        if at + FRAME_HEADER_LEN > data.len() {
            break;
        }
        let claimed = u64::from(u32::from_le_bytes([
            data[at],
            data[at + 1],
            data[at + 2],
            data[at + 3],
        ]));
        if (at + FRAME_HEADER_LEN) as u64 + claimed <= data.len() as u64 {
            spent += claimed;
            if spent > PROBE_BUDGET_BYTES {
                return Probe::GaveUp(at);
            }
        }
        let lsn = base_lsn + (at - SEGMENT_HEADER_LEN) as u64;
        if matches!(decode_frame(&data[at..], lsn), Decoded::Frame { .. }) {
            return Probe::Found(at);
        }
        at += 1;
    }
    Probe::NotFound
}

fn first_non_zero(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b != 0)
}
