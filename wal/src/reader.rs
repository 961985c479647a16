//! Reading frames back, for replay at start-up: [`FrameReader`] walks a snapshot of the
//! segment list from a given LSN up to a durable limit, re-checking every CRC.
//!
//! A segment's frames end exactly where the next segment begins (recovery checked this, the
//! writer keeps it), so the reader moves on at that LSN; in the newest segment it stops at
//! the durable LSN taken when the reader was made. It reads with its own file handles and
//! never blocks the writer.

use std::io::{BufReader, Read};
use std::sync::Arc;

use crate::env::FileSystem;
use crate::error::{Result, WalError};
use crate::format::{frame_len, FrameHeader, SegmentHeader, FRAME_HEADER_LEN, SEGMENT_HEADER_LEN};
use crate::fs;
use crate::lsn::Lsn;
use crate::segment::SegmentMeta;

/// One frame read back from the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// LSN the frame starts at.
    pub lsn: Lsn,
    /// LSN just past the frame: what [`crate::Wal::append`] returned for it.
    pub end_lsn: Lsn,
    /// The caller's tag given to [`crate::Wal::append`].
    pub kind: u8,
    /// The bytes given to [`crate::Wal::append`].
    pub payload: Vec<u8>,
}

/// Iterator over the frames with `end_lsn > from` and `end_lsn <= limit`. Yields an error
/// at most once, then ends.
pub(crate) struct FrameReader {
    env: Arc<dyn FileSystem>,
    segments: Vec<SegmentMeta>,
    /// Index in `segments` of the segment being read (or to open next).
    index: usize,
    file: Option<BufReader<Box<dyn Read + Send>>>,
    lsn: Lsn,
    from: Lsn,
    limit: Lsn,
    done: bool,
}

impl FrameReader {
    pub(crate) fn new(
        env: Arc<dyn FileSystem>,
        segments: Vec<SegmentMeta>,
        from: Lsn,
        limit: Lsn,
    ) -> Self {
        // The frame holding `from` lives in the last segment that starts at or before it.
        let index = segments
            .iter()
            .rposition(|s| s.base_lsn <= from)
            .unwrap_or(0);
        let lsn = segments.get(index).map_or(limit, |s| s.base_lsn);
        FrameReader {
            env,
            segments,
            index,
            file: None,
            lsn,
            from,
            limit,
            done: false,
        }
    }

    /// LSN at which the current segment's frames end.
    fn segment_end(&self) -> Lsn {
        self.segments
            .get(self.index + 1)
            .map_or(self.limit, |next| next.base_lsn.min(self.limit))
    }

    fn offset(&self) -> u64 {
        let base = self.segments.get(self.index).map_or(0, |s| s.base_lsn);
        SEGMENT_HEADER_LEN as u64 + (self.lsn - base)
    }

    fn corrupt(&self, reason: impl Into<String>) -> WalError {
        let path = self
            .segments
            .get(self.index)
            .map(|s| s.path.clone())
            .unwrap_or_default();
        WalError::corrupt(path, self.offset(), reason)
    }

    fn open_segment(&mut self) -> Result<()> {
        let Some(meta) = self.segments.get(self.index) else {
            return Ok(());
        };
        if meta.base_lsn != self.lsn {
            return Err(self.corrupt(format!(
                "the previous segment ends at lsn {} but this one starts at {}",
                self.lsn, meta.base_lsn
            )));
        }
        let mut file =
            BufReader::with_capacity(256 << 10, fs::open_read(self.env.as_ref(), &meta.path)?);
        let mut head = [0u8; SEGMENT_HEADER_LEN];
        let n = fs::read_full(&mut file, &mut head, &meta.path)?;
        let header = SegmentHeader::decode(&head[..n])
            .map_err(|reason| WalError::corrupt(&meta.path, 0, reason))?;
        if header.base_lsn != meta.base_lsn {
            return Err(WalError::corrupt(
                &meta.path,
                24,
                format!(
                    "header says base lsn {} but the file name says {}",
                    header.base_lsn, meta.base_lsn
                ),
            ));
        }
        self.file = Some(file);
        Ok(())
    }

    /// Reads the frame at `self.lsn`, which must end by `end`.
    fn read_frame(&mut self, end: Lsn) -> Result<Frame> {
        let lsn = self.lsn;
        let path = self
            .segments
            .get(self.index)
            .map(|s| s.path.clone())
            .unwrap_or_default();
        let Some(file) = self.file.as_mut() else {
            return Err(self.corrupt("segment not open"));
        };
        let mut head = [0u8; FRAME_HEADER_LEN];
        let n = fs::read_full(file, &mut head, &path)?;
        if n < FRAME_HEADER_LEN {
            return Err(self.corrupt(format!(
                "file ends inside a frame header; frames should reach lsn {end}"
            )));
        }
        let header = FrameHeader::decode(&head);
        if header.is_end() {
            return Err(self.corrupt(format!(
                "frames end at lsn {lsn} but should reach lsn {end}"
            )));
        }
        let end_lsn = lsn + frame_len(header.payload_len as usize);
        if end_lsn > end {
            return Err(self.corrupt(format!(
                "frame of {} payload bytes runs past lsn {end}",
                header.payload_len
            )));
        }
        let mut payload = vec![0u8; header.payload_len as usize];
        let n = fs::read_full(file, &mut payload, &path)?;
        if n < payload.len() || !header.matches(lsn, &payload) {
            return Err(self.corrupt(format!("frame crc mismatch at lsn {lsn}")));
        }
        self.lsn = end_lsn;
        Ok(Frame {
            lsn,
            end_lsn,
            kind: header.kind,
            payload,
        })
    }

    fn next_frame(&mut self) -> Result<Option<Frame>> {
        loop {
            if self.lsn >= self.limit || self.index >= self.segments.len() {
                return Ok(None);
            }
            let end = self.segment_end();
            if self.lsn >= end {
                self.file = None;
                self.index += 1;
                continue;
            }
            if self.file.is_none() {
                self.open_segment()?;
            }
            let frame = self.read_frame(end)?;
            if frame.end_lsn > self.from {
                return Ok(Some(frame));
            }
        }
    }
}

impl Iterator for FrameReader {
    type Item = Result<Frame>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.next_frame() {
            Ok(Some(frame)) => Some(Ok(frame)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
