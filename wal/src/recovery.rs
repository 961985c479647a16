//! Recovery, run by [`crate::Wal::open`] before the writer starts: decide, by policy, what
//! of the directory is the log, and where the next frame goes.
//!
//! Segments are scanned in base LSN order; every header and every frame CRC is checked.
//!
//! - A segment that is not the newest must hold frames up to exactly the next segment's
//!   base LSN, followed only by zeros. Anything else (a bad frame, garbage after the last
//!   frame, a gap or overlap between segments, a bad header) is [`WalError::Corrupt`] in
//!   every mode: those bytes were synced before the next segment was created, so damage
//!   there is not a crash artefact.
//! - In the newest segment, a bad or partial frame (or non-zero bytes after the end marker)
//!   is a torn tail when no valid frame follows it anywhere later in the file: a crash
//!   mid-write. [`RecoveryMode::TolerateTailCorruption`] cuts the file back to the end of
//!   the last good frame (`ftruncate` + fsync) and reports the cut bytes;
//!   [`RecoveryMode::AbsoluteConsistency`] refuses. If a valid frame does follow, the damage
//!   is in the middle of written data: Corrupt in both modes.
//! - A newest segment whose header is torn and whose body is all zero was never written to
//!   (a crash while creating it): removed in tolerate mode, Corrupt otherwise. A torn header
//!   in front of written data is Corrupt in both modes.
//!
//! Recovery never prepares a segment for appending: the writer always starts a brand-new
//! segment at `end_lsn`, so no byte from an earlier life of a file can reappear as data.

use std::path::{Path, PathBuf};

use crate::error::{Result, WalError};
use crate::format::{decode_frame, Decoded, SegmentHeader, FRAME_HEADER_LEN, SEGMENT_HEADER_LEN};
use crate::fs;
use crate::options::RecoveryMode;
use crate::segment::{list_segments, SegmentMeta};
use crate::Lsn;

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

pub(crate) fn recover(dir: &Path, mode: RecoveryMode) -> Result<Outcome> {
    let listed = list_segments(dir)?;
    let mut kept = Vec::with_capacity(listed.len());
    let mut truncated_bytes = 0;
    let mut next_segment_id = 0;
    let mut end_lsn = listed.first().map_or(0, |s| s.base_lsn);
    let mut previous: Option<Previous> = None;

    for (i, meta) in listed.iter().enumerate() {
        let newest = i + 1 == listed.len();
        let path = &meta.path;
        let data = fs::read_file(path)?;
        let header = match SegmentHeader::decode(&data) {
            Ok(header) => header,
            Err(reason) => {
                let body_unwritten = data
                    .get(SEGMENT_HEADER_LEN..)
                    .is_none_or(|body| first_non_zero(body).is_none());
                if newest && body_unwritten && mode == RecoveryMode::TolerateTailCorruption {
                    tracing::warn!(segment = %path.display(), %reason,
                        "removing the newest segment: its header is torn and nothing was written to it");
                    fs::remove_file(path)?;
                    fs::sync_dir(dir)?;
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
            if let Some(at) = find_valid_frame(&data, stop + 1, meta.base_lsn) {
                return Err(WalError::corrupt(
                    path,
                    stop as u64,
                    format!("{reason}, yet a valid frame follows at offset {at}"),
                ));
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
            fs::truncate(path, stop as u64)?;
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

/// Offset of the first valid frame at or after `from`, probing every byte position (the
/// CRC covers the LSN, so a frame only validates where it was written). Zero runs are
/// skipped: a frame header always has a non-zero byte.
fn find_valid_frame(data: &[u8], from: usize, base_lsn: Lsn) -> Option<usize> {
    let mut at = from;
    while at + FRAME_HEADER_LEN <= data.len() {
        let non_zero = at + first_non_zero(&data[at..])?;
        // A header containing the byte at `non_zero` starts at most 8 bytes before it.
        at = at.max(non_zero.saturating_sub(FRAME_HEADER_LEN - 1));
        let lsn = base_lsn + (at - SEGMENT_HEADER_LEN) as u64;
        if matches!(decode_frame(&data[at..], lsn), Decoded::Frame { .. }) {
            return Some(at);
        }
        at += 1;
    }
    None
}

fn first_non_zero(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b != 0)
}
