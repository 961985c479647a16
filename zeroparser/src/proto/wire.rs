//! The protobuf wire format: varints, tags and wire types, fixed-width values,
//! length-delimited slices, and skipping of fields the plan does not know (groups included).
//!
//! ```text
//! record  := field*
//! field   := tag value
//! tag     := varint (field_number << 3 | wire_type)
//! value   := varint                      wire type 0 VARINT
//!          | 8 bytes little-endian       wire type 1 I64
//!          | varint length, bytes        wire type 2 LEN
//!          | field* end-group tag        wire type 3 SGROUP .. 4 EGROUP (same number)
//!          | 4 bytes little-endian       wire type 5 I32
//! varint  := 1..10 bytes, 7 bits each, least significant first, high bit = more follows
//! ```
//!
//! A [`Reader`] never reads past its slice: every failure is a [`DecodeError`] carrying the
//! absolute byte offset in the record (the reader knows where its slice starts).

use crate::error::{DecodeError, DecodeErrorKind, WireType};

/// Deepest nesting of messages and groups in a record.
pub const MAX_DEPTH: usize = 64;

/// Largest legal field number (2^29 - 1).
pub(crate) const MAX_FIELD_NUMBER: u32 = (1 << 29) - 1;

impl WireType {
    /// The wire type of the low three tag bits, if legal.
    pub(crate) fn from_bits(bits: u8) -> Option<WireType> {
        Some(match bits {
            0 => WireType::Varint,
            1 => WireType::I64,
            2 => WireType::Len,
            3 => WireType::SGroup,
            4 => WireType::EGroup,
            5 => WireType::I32,
            _ => return None,
        })
    }

    /// The low three tag bits of this wire type.
    pub(crate) fn bits(self) -> u8 {
        match self {
            WireType::Varint => 0,
            WireType::I64 => 1,
            WireType::Len => 2,
            WireType::SGroup => 3,
            WireType::EGroup => 4,
            WireType::I32 => 5,
        }
    }
}

/// A cursor over one message (or packed field) of a record.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Reader<'a> {
    /// A reader over `buf`, which starts at byte `base` of the record.
    pub(crate) fn new(buf: &'a [u8], base: usize) -> Self {
        Self { buf, pos: 0, base }
    }

    /// True when every byte has been read.
    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// The next tag if it is one or two bytes long (field numbers below 2048), with its
    /// length, without consuming it; unchecked.
    #[inline(always)]
    pub(crate) fn peek_short_tag(&self) -> Option<(u32, usize)> {
        let first = *self.buf.get(self.pos)?;
        if first < 0x80 {
            return Some((u32::from(first), 1));
        }
        let second = *self.buf.get(self.pos + 1)?;
        if second < 0x80 {
            return Some((u32::from(first & 0x7f) | (u32::from(second) << 7), 2));
        }
        None
    }

    /// Consumes `len` bytes that [`peek_short_tag`](Self::peek_short_tag) looked at.
    #[inline(always)]
    pub(crate) fn advance(&mut self, len: usize) {
        self.pos += len;
    }

    /// Absolute offset of the next byte in the record.
    pub(crate) fn offset(&self) -> usize {
        self.base + self.pos
    }

    fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// Reads a varint of at most 10 bytes.
    #[inline(always)]
    pub(crate) fn read_varint(&mut self) -> Result<u64, DecodeError> {
        // One-byte varints (tags of fields 1..15, small values) are the common case.
        if let Some(&byte) = self.buf.get(self.pos) {
            if byte < 0x80 {
                self.pos += 1;
                return Ok(u64::from(byte));
            }
        }
        self.read_varint_multi()
    }

    /// A varint of one or more bytes: up to eight at once when eight are left, else byte by
    /// byte.
    #[inline]
    fn read_varint_multi(&mut self) -> Result<u64, DecodeError> {
        let word = self
            .buf
            .get(self.pos..self.pos.saturating_add(8))
            .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
            .map(u64::from_le_bytes);
        if let Some(word) = word {
            // The lowest byte with its high bit clear ends the varint.
            let ends = !word & 0x8080_8080_8080_8080;
            if ends != 0 {
                let bits = ends.trailing_zeros() + 1; // 8 * length
                self.pos += (bits / 8) as usize;
                let mut x = if bits >= 64 {
                    word
                } else {
                    word & ((1u64 << bits) - 1)
                };
                // Squeeze out the continuation bits: 7-bit groups → 14 → 28 → 56 bits.
                x = ((x & 0x7f00_7f00_7f00_7f00) >> 1) | (x & 0x007f_007f_007f_007f);
                x = ((x & 0x3fff_0000_3fff_0000) >> 2) | (x & 0x0000_3fff_0000_3fff);
                x = ((x & 0x0fff_ffff_0000_0000) >> 4) | (x & 0x0000_0000_0fff_ffff);
                return Ok(x);
            }
        }
        self.read_varint_slow()
    }

    /// Varints of nine or ten bytes, and varints near the end of the buffer.
    #[inline(never)]
    fn read_varint_slow(&mut self) -> Result<u64, DecodeError> {
        let start = self.offset();
        let mut value: u64 = 0;
        for i in 0..10 {
            let Some(&byte) = self.buf.get(self.pos) else {
                return Err(DecodeError::at(DecodeErrorKind::Truncated, start));
            };
            self.pos += 1;
            if i == 9 && byte > 1 {
                return Err(DecodeError::at(DecodeErrorKind::VarintOverflow, start));
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(DecodeError::at(DecodeErrorKind::VarintOverflow, start))
    }

    /// Reads a tag: field number and wire type.
    #[inline(always)]
    pub(crate) fn read_tag(&mut self) -> Result<(u32, WireType), DecodeError> {
        let start = self.offset();
        let tag = self.read_varint()?;
        let number = tag >> 3;
        if number == 0 || number > u64::from(MAX_FIELD_NUMBER) {
            return Err(DecodeError::at(
                DecodeErrorKind::InvalidFieldNumber { number },
                start,
            ));
        }
        let bits = (tag & 7) as u8;
        let Some(wire) = WireType::from_bits(bits) else {
            return Err(DecodeError::at(
                DecodeErrorKind::InvalidWireType { value: bits },
                start,
            ));
        };
        Ok((u32::try_from(number).unwrap_or(u32::MAX), wire))
    }

    #[inline(always)]
    fn read_array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let start = self.offset();
        let bytes = self
            .buf
            .get(self.pos..self.pos.saturating_add(N))
            .and_then(|slice| <[u8; N]>::try_from(slice).ok())
            .ok_or_else(|| DecodeError::at(DecodeErrorKind::Truncated, start))?;
        self.pos += N;
        Ok(bytes)
    }

    /// Reads 4 little-endian bytes.
    #[inline(always)]
    pub(crate) fn read_fixed32(&mut self) -> Result<u32, DecodeError> {
        self.read_array::<4>().map(u32::from_le_bytes)
    }

    /// Reads 8 little-endian bytes.
    #[inline(always)]
    pub(crate) fn read_fixed64(&mut self) -> Result<u64, DecodeError> {
        self.read_array::<8>().map(u64::from_le_bytes)
    }

    /// Reads a length prefix and the bytes it covers; returns them and their absolute offset.
    #[inline(always)]
    pub(crate) fn read_len_delimited(&mut self) -> Result<(&'a [u8], usize), DecodeError> {
        let start = self.offset();
        let length = self.read_varint()?;
        let remaining = self.remaining();
        let len = usize::try_from(length)
            .ok()
            .filter(|len| *len <= remaining)
            .ok_or_else(|| {
                DecodeError::at(DecodeErrorKind::LengthPastEnd { length, remaining }, start)
            })?;
        let body_offset = self.offset();
        let body = self
            .buf
            .get(self.pos..self.pos + len)
            .ok_or_else(|| DecodeError::at(DecodeErrorKind::Truncated, start))?;
        self.pos += len;
        Ok((body, body_offset))
    }

    /// A reader over a length-delimited value. Inlined: a call returned the reader through
    /// memory in two 8-byte stores that the caller read back as one 16-byte load, a
    /// store-forwarding stall (a quarter of `visit_message`'s samples on structs ~200 B).
    #[inline(always)]
    pub(crate) fn read_sub_reader(&mut self) -> Result<Reader<'a>, DecodeError> {
        let (body, offset) = self.read_len_delimited()?;
        Ok(Reader::new(body, offset))
    }

    /// Skips the value of a field whose tag was just read. `depth` is the nesting depth of
    /// the message that holds the field.
    pub(crate) fn skip_field(
        &mut self,
        number: u32,
        wire: WireType,
        tag_offset: usize,
        depth: usize,
    ) -> Result<(), DecodeError> {
        match wire {
            WireType::Varint => self.read_varint().map(drop),
            WireType::I64 => self.read_fixed64().map(drop),
            WireType::I32 => self.read_fixed32().map(drop),
            WireType::Len => self.read_len_delimited().map(drop),
            WireType::SGroup => self.skip_group(number, tag_offset, depth + 1),
            WireType::EGroup => Err(DecodeError::at(DecodeErrorKind::InvalidGroup, tag_offset)),
        }
    }

    /// Skips a group's fields up to its end-group tag (same field number).
    fn skip_group(
        &mut self,
        number: u32,
        start_offset: usize,
        depth: usize,
    ) -> Result<(), DecodeError> {
        if depth > MAX_DEPTH {
            return Err(DecodeError::at(
                DecodeErrorKind::DepthExceeded { limit: MAX_DEPTH },
                start_offset,
            ));
        }
        loop {
            if self.is_empty() {
                return Err(DecodeError::at(DecodeErrorKind::InvalidGroup, start_offset));
            }
            let tag_offset = self.offset();
            let (inner, wire) = self.read_tag()?;
            if wire == WireType::EGroup {
                if inner == number {
                    return Ok(());
                }
                return Err(DecodeError::at(DecodeErrorKind::InvalidGroup, tag_offset));
            }
            self.skip_field(inner, wire, tag_offset, depth)?;
        }
    }
}

/// Decodes a zigzag-encoded 32-bit value.
pub(crate) fn zigzag32(value: u32) -> i32 {
    ((value >> 1) as i32) ^ -((value & 1) as i32)
}

/// Decodes a zigzag-encoded 64-bit value.
pub(crate) fn zigzag64(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_decode_up_to_ten_bytes() {
        let mut reader = Reader::new(&[0x96, 0x01], 0);
        assert_eq!(reader.read_varint(), Ok(150));
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(Reader::new(&max, 0).read_varint(), Ok(u64::MAX));
    }

    #[test]
    fn varints_of_every_length_decode_with_and_without_trailing_bytes() {
        let mut values = vec![0u64, 1, 127, u64::MAX, i64::MAX as u64];
        for shift in 7..64 {
            values.extend([(1u64 << shift) - 1, 1u64 << shift, (1u64 << shift) + 1]);
        }
        for value in values {
            let mut bytes = Vec::new();
            let mut v = value;
            loop {
                let byte = (v & 0x7f) as u8;
                v >>= 7;
                if v == 0 {
                    bytes.push(byte);
                    break;
                }
                bytes.push(byte | 0x80);
            }
            let len = bytes.len();
            let mut reader = Reader::new(&bytes, 0);
            assert_eq!(reader.read_varint(), Ok(value), "{value} alone");
            assert_eq!(reader.offset(), len);
            let mut padded = bytes.clone();
            padded.extend([0xff; 12]);
            let mut reader = Reader::new(&padded, 0);
            assert_eq!(reader.read_varint(), Ok(value), "{value} padded");
            assert_eq!(reader.offset(), len);
        }
    }

    #[test]
    fn an_eleven_byte_varint_is_an_overflow() {
        let long = [0x80; 11];
        let error = Reader::new(&long, 5).read_varint().expect_err("too long");
        assert_eq!(error.kind(), &DecodeErrorKind::VarintOverflow);
        assert_eq!(error.offset(), Some(5));
        let too_big = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        let error = Reader::new(&too_big, 0)
            .read_varint()
            .expect_err("> 64 bits");
        assert_eq!(error.kind(), &DecodeErrorKind::VarintOverflow);
    }

    #[test]
    fn a_varint_cut_short_is_truncated() {
        let error = Reader::new(&[0x80, 0x80], 0)
            .read_varint()
            .expect_err("no final byte");
        assert_eq!(error.kind(), &DecodeErrorKind::Truncated);
    }

    #[test]
    fn a_length_beyond_the_message_is_length_past_end() {
        let error = Reader::new(&[0x05, 1, 2], 10)
            .read_len_delimited()
            .expect_err("5 > 2");
        assert_eq!(
            error.kind(),
            &DecodeErrorKind::LengthPastEnd {
                length: 5,
                remaining: 2
            }
        );
        assert_eq!(error.offset(), Some(10));
    }

    #[test]
    fn tags_with_field_number_zero_or_wire_type_seven_are_rejected() {
        let error = Reader::new(&[0x00], 0).read_tag().expect_err("number 0");
        assert!(matches!(
            error.kind(),
            DecodeErrorKind::InvalidFieldNumber { number: 0 }
        ));
        let error = Reader::new(&[0x0f], 0).read_tag().expect_err("wire type 7");
        assert!(matches!(
            error.kind(),
            DecodeErrorKind::InvalidWireType { value: 7 }
        ));
    }

    #[test]
    fn nested_groups_are_skipped_to_their_matching_end() {
        // group 5 { varint 1; group 6 { i32 2 } } then varint field 7.
        let bytes = [0x08, 0x01, 0x33, 0x15, 1, 2, 3, 4, 0x34, 0x2c, 0x38, 0x09];
        let mut reader = Reader::new(&bytes, 0);
        reader
            .skip_field(5, WireType::SGroup, 0, 0)
            .expect("group skipped");
        assert_eq!(reader.read_tag(), Ok((7, WireType::Varint)));
    }

    #[test]
    fn a_group_closed_with_another_number_is_invalid() {
        let bytes = [0x34];
        let error = Reader::new(&bytes, 0)
            .skip_field(5, WireType::SGroup, 0, 0)
            .expect_err("end group 6 closes group 5");
        assert_eq!(error.kind(), &DecodeErrorKind::InvalidGroup);
    }

    #[test]
    fn deeply_nested_groups_exceed_the_depth_limit() {
        let bytes = vec![0x0b; 1000];
        let error = Reader::new(&bytes, 0)
            .skip_field(1, WireType::SGroup, 0, 0)
            .expect_err("too deep");
        assert!(matches!(
            error.kind(),
            DecodeErrorKind::DepthExceeded { .. }
        ));
    }

    #[test]
    fn zigzag_decodes_small_magnitudes() {
        assert_eq!(zigzag32(0), 0);
        assert_eq!(zigzag32(1), -1);
        assert_eq!(zigzag32(2), 1);
        assert_eq!(zigzag32(u32::MAX), i32::MIN);
        assert_eq!(zigzag64(u64::MAX), i64::MIN);
        assert_eq!(zigzag64(4), 2);
    }
}
