//! The byte layout of the log: segment headers and frames, encoded and decoded here and
//! nowhere else. Nothing in this module touches a file.
//!
//! # Segment file
//!
//! A segment is the file `{dir}/{base_lsn:020}.wal`, preallocated to `segment_bytes` (or to
//! exactly one frame if a single frame is larger) so that writes never change its size.
//! All integers are little endian.
//!
//! ```text
//! offset size field
//!      0    8 magic       b"SLUICEWL"
//!      8    4 version     u32 = 1
//!     12    4 reserved    u32 = 0
//!     16    8 segment_id  u64, strictly increasing over the life of the log
//!     24    8 base_lsn    u64, LSN of the segment's first frame; equals the file name
//!     32    4 header_crc  u32 = crc32c(bytes 0..32)
//!     36      frames, back to back
//! ```
//!
//! The frame that starts at LSN `lsn` sits at file offset `36 + (lsn - base_lsn)`: an LSN is
//! a byte position in the logical log, continuous across segments.
//!
//! # Frame
//!
//! ```text
//! +-----------------+---------+---------+------------------------+
//! | payload_len u32 | crc u32 | kind u8 | payload (payload_len)  |
//! +-----------------+---------+---------+------------------------+
//! crc = crc32c(lsn as u64 LE ‖ kind ‖ payload)
//! ```
//!
//! A frame occupies `9 + payload_len` bytes of file and of LSN space. Its own start LSN is
//! covered by the CRC but not stored, so bytes left over from an older life of a file can
//! never validate at a different position.
//!
//! Frames never span segments: when the next frame does not fit, the writer seals the
//! segment (the rest stays zero, as preallocated) and opens the next one with
//! `base_lsn` = that frame's LSN. Nine zero bytes (length 0, crc 0, kind 0) mark the end of
//! the written data in a segment; to keep that marker unambiguous, a frame of kind 0 with an
//! empty payload is refused at append (see [`is_end_marker_frame`]).

use crate::lsn::Lsn;

/// Magic number at the start of every segment.
pub(crate) const MAGIC: &[u8; 8] = b"SLUICEWL";
/// Version of the segment format described above.
pub(crate) const VERSION: u32 = 1;
/// Bytes of the segment header, frames start at this file offset.
pub(crate) const SEGMENT_HEADER_LEN: usize = 36;
/// Bytes of a frame header (length, crc, kind).
pub(crate) const FRAME_HEADER_LEN: usize = 9;
/// A batch (one write, one sync) stops gathering once it holds this many bytes, so every
/// frame of a batch starts less than this many bytes after the batch's first frame.
/// Recovery relies on it to tell a torn unsynced batch from damage to synced data; a
/// change here is a format change.
pub(crate) const MAX_BATCH_BYTES: u64 = 4 << 20;

/// The decoded segment header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegmentHeader {
    pub segment_id: u64,
    pub base_lsn: Lsn,
}

impl SegmentHeader {
    pub(crate) fn encode(&self) -> [u8; SEGMENT_HEADER_LEN] {
        let mut b = [0u8; SEGMENT_HEADER_LEN];
        b[0..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        // b[12..16]: reserved, zero.
        b[16..24].copy_from_slice(&self.segment_id.to_le_bytes());
        b[24..32].copy_from_slice(&self.base_lsn.to_le_bytes());
        let crc = crc32c::crc32c(&b[0..32]);
        b[32..36].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes the header at the start of `buf`; the error says what is wrong with it.
    pub(crate) fn decode(buf: &[u8]) -> Result<Self, String> {
        let Some(b) = buf.get(..SEGMENT_HEADER_LEN) else {
            return Err(format!(
                "segment header is {} bytes, expected {SEGMENT_HEADER_LEN}",
                buf.len()
            ));
        };
        if &b[0..8] != MAGIC {
            return Err("bad magic number".into());
        }
        let stored_crc = u32_at(b, 32);
        let crc = crc32c::crc32c(&b[0..32]);
        if stored_crc != crc {
            return Err(format!(
                "segment header crc mismatch (stored {stored_crc:#010x}, computed {crc:#010x})"
            ));
        }
        let version = u32_at(b, 8);
        if version != VERSION {
            return Err(format!("unsupported segment version {version}"));
        }
        Ok(SegmentHeader {
            segment_id: u64_at(b, 16),
            base_lsn: u64_at(b, 24),
        })
    }
}

/// LSN space (and file bytes) taken by a frame with `payload_len` bytes of payload.
pub(crate) fn frame_len(payload_len: usize) -> u64 {
    (FRAME_HEADER_LEN + payload_len) as u64
}

/// True for the one frame whose header would read as the end-of-data marker.
pub(crate) fn is_end_marker_frame(kind: u8, payload: &[u8]) -> bool {
    kind == 0 && payload.is_empty()
}

/// CRC of the frame starting at `lsn`.
pub(crate) fn frame_crc(lsn: Lsn, kind: u8, payload: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&lsn.to_le_bytes());
    let crc = crc32c::crc32c_append(crc, &[kind]);
    crc32c::crc32c_append(crc, payload)
}

/// The fixed part of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FrameHeader {
    pub payload_len: u32,
    pub crc: u32,
    pub kind: u8,
}

impl FrameHeader {
    /// Header of the frame holding `payload` at `lsn`; the caller has checked that the
    /// payload length fits a `u32`.
    pub(crate) fn new(lsn: Lsn, kind: u8, payload: &[u8]) -> Self {
        FrameHeader {
            payload_len: payload.len() as u32,
            crc: frame_crc(lsn, kind, payload),
            kind,
        }
    }

    pub(crate) fn encode(&self) -> [u8; FRAME_HEADER_LEN] {
        let mut b = [0u8; FRAME_HEADER_LEN];
        b[0..4].copy_from_slice(&self.payload_len.to_le_bytes());
        b[4..8].copy_from_slice(&self.crc.to_le_bytes());
        b[8] = self.kind;
        b
    }

    pub(crate) fn decode(b: &[u8; FRAME_HEADER_LEN]) -> Self {
        FrameHeader {
            payload_len: u32_at(b, 0),
            crc: u32_at(b, 4),
            kind: b[8],
        }
    }

    /// All nine bytes zero: the end of the written data in this segment.
    pub(crate) fn is_end(&self) -> bool {
        self.payload_len == 0 && self.crc == 0 && self.kind == 0
    }

    /// Whether `payload` at `lsn` is what this header describes.
    pub(crate) fn matches(&self, lsn: Lsn, payload: &[u8]) -> bool {
        payload.len() == self.payload_len as usize && frame_crc(lsn, self.kind, payload) == self.crc
    }
}

/// Outcome of decoding the bytes at one frame position.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decoded<'a> {
    /// A valid frame; it occupies `frame_len(payload.len())` bytes.
    Frame { kind: u8, payload: &'a [u8] },
    /// The end-of-data marker, or fewer than nine bytes left that are all zero.
    End,
    /// Anything else.
    Invalid(InvalidFrame),
}

/// Why the bytes at a frame position are not a frame. Cheap to build: recovery probes
/// many positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InvalidFrame {
    PartialHeader { bytes: usize },
    PastEnd { payload_len: u32, left: usize },
    CrcMismatch { lsn: Lsn },
}

impl std::fmt::Display for InvalidFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InvalidFrame::PartialHeader { bytes } => {
                write!(f, "partial frame header ({bytes} bytes)")
            }
            InvalidFrame::PastEnd { payload_len, left } => write!(
                f,
                "frame length {payload_len} runs past the end of the file ({left} bytes left)"
            ),
            InvalidFrame::CrcMismatch { lsn } => write!(f, "frame crc mismatch at lsn {lsn}"),
        }
    }
}

/// Decodes the frame that `buf` starts with, assuming it belongs at `lsn`. `buf` runs to
/// the end of the segment file.
pub(crate) fn decode_frame(buf: &[u8], lsn: Lsn) -> Decoded<'_> {
    let Some(head) = buf.first_chunk::<FRAME_HEADER_LEN>() else {
        return if buf.iter().all(|&b| b == 0) {
            Decoded::End
        } else {
            Decoded::Invalid(InvalidFrame::PartialHeader { bytes: buf.len() })
        };
    };
    let header = FrameHeader::decode(head);
    if header.is_end() {
        return Decoded::End;
    }
    let rest = &buf[FRAME_HEADER_LEN..];
    let Some(payload) = rest.get(..header.payload_len as usize) else {
        return Decoded::Invalid(InvalidFrame::PastEnd {
            payload_len: header.payload_len,
            left: rest.len(),
        });
    };
    if !header.matches(lsn, payload) {
        return Decoded::Invalid(InvalidFrame::CrcMismatch { lsn });
    }
    Decoded::Frame {
        kind: header.kind,
        payload,
    }
}

/// A whole frame as one buffer (the writer gathers header and payload instead).
#[cfg(test)]
pub(crate) fn encode_frame(lsn: Lsn, kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = FrameHeader::new(lsn, kind, payload).encode().to_vec();
    v.extend_from_slice(payload);
    v
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn any_frame_decodes_back_to_its_kind_and_payload(
            lsn in any::<u64>(),
            kind in any::<u8>(),
            payload in proptest::collection::vec(any::<u8>(), 0..2048),
            trailing_zeros in 0usize..64,
        ) {
            prop_assume!(!is_end_marker_frame(kind, &payload));
            let mut buf = encode_frame(lsn, kind, &payload);
            prop_assert_eq!(buf.len() as u64, frame_len(payload.len()));
            buf.resize(buf.len() + trailing_zeros, 0);
            prop_assert_eq!(decode_frame(&buf, lsn), Decoded::Frame { kind, payload: &payload });
            let after = &buf[frame_len(payload.len()) as usize..];
            prop_assert_eq!(decode_frame(after, lsn + frame_len(payload.len())), Decoded::End);
        }

        #[test]
        fn a_frame_never_validates_at_another_lsn(
            lsn in any::<u64>(),
            other in any::<u64>(),
            kind in any::<u8>(),
            payload in proptest::collection::vec(any::<u8>(), 1..256),
        ) {
            prop_assume!(lsn != other);
            let buf = encode_frame(lsn, kind, &payload);
            prop_assert!(matches!(decode_frame(&buf, other), Decoded::Invalid(_)));
        }

        #[test]
        fn any_flipped_bit_in_a_frame_is_detected(
            lsn in any::<u64>(),
            kind in any::<u8>(),
            payload in proptest::collection::vec(any::<u8>(), 1..256),
            bit in any::<prop::sample::Index>(),
        ) {
            let mut buf = encode_frame(lsn, kind, &payload);
            let bit = bit.index(buf.len() * 8);
            buf[bit / 8] ^= 1 << (bit % 8);
            let still_valid = matches!(decode_frame(&buf, lsn), Decoded::Frame { .. });
            prop_assert!(!still_valid);
        }
    }

    #[test]
    fn a_segment_header_round_trips_and_rejects_a_flipped_byte() {
        let h = SegmentHeader {
            segment_id: 7,
            base_lsn: 123_456,
        };
        let mut b = h.encode();
        assert_eq!(&b[0..8], b"SLUICEWL");
        assert_eq!(SegmentHeader::decode(&b), Ok(h));
        b[20] ^= 0x40;
        assert!(SegmentHeader::decode(&b).is_err());
        assert!(SegmentHeader::decode(&b[..20]).is_err());
    }

    #[test]
    fn a_frame_cut_short_is_invalid_not_the_end() {
        let buf = encode_frame(100, 2, b"hello world");
        assert!(matches!(decode_frame(&buf[..5], 100), Decoded::Invalid(_)));
        assert!(matches!(decode_frame(&buf[..12], 100), Decoded::Invalid(_)));
        assert_eq!(decode_frame(&[0u8; 4], 100), Decoded::End);
    }
}
