//! [`Reader`]: the Avro binary encoding's primitives over one datum's bytes — zig-zag
//! varints (at most 10 bytes, as the Java and Rust reference decoders read them), lengths,
//! block counts, floats, booleans — each error carrying its byte offset.

use super::scalar::decimal_text;
use crate::error::{DecodeError, DecodeErrorKind};

/// A cursor over one datum.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    /// Offset of the next byte.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    fn error(&self, kind: DecodeErrorKind) -> DecodeError {
        DecodeError::at(kind, self.pos)
    }

    #[inline]
    fn byte(&mut self) -> Result<u8, DecodeError> {
        let byte = self
            .bytes
            .get(self.pos)
            .copied()
            .ok_or_else(|| self.error(DecodeErrorKind::Truncated))?;
        self.pos += 1;
        Ok(byte)
    }

    /// A zig-zag `long`.
    #[inline]
    pub(crate) fn long(&mut self) -> Result<i64, DecodeError> {
        let start = self.pos;
        let mut value = 0u64;
        let mut shift = 0u32;
        loop {
            if shift > 63 {
                return Err(DecodeError::at(DecodeErrorKind::VarintOverflow, start));
            }
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        Ok(((value >> 1) as i64) ^ -((value & 1) as i64))
    }

    /// A zig-zag `int` (a `long` that must fit 32 bits).
    #[inline]
    pub(crate) fn int(&mut self) -> Result<i32, DecodeError> {
        let start = self.pos;
        let value = self.long()?;
        i32::try_from(value).map_err(|_| {
            DecodeError::at(
                DecodeErrorKind::OutOfRange {
                    value: value.to_string(),
                    target: "Avro int",
                },
                start,
            )
        })
    }

    /// A `boolean`: one byte, 0 or 1.
    pub(crate) fn boolean(&mut self) -> Result<bool, DecodeError> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(DecodeError::at(
                DecodeErrorKind::InvalidBoolean { value },
                self.pos - 1,
            )),
        }
    }

    /// `n` raw bytes.
    #[inline]
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len())
            .ok_or_else(|| {
                self.error(DecodeErrorKind::LengthPastEnd {
                    length: n as u64,
                    remaining: self.remaining(),
                })
            })?;
        let slice = self.bytes.get(self.pos..end).unwrap_or_default();
        self.pos = end;
        Ok(slice)
    }

    /// A `float`.
    pub(crate) fn float(&mut self) -> Result<f32, DecodeError> {
        let bytes = self.fixed::<4>()?;
        Ok(f32::from_le_bytes(bytes))
    }

    /// A `double`.
    pub(crate) fn double(&mut self) -> Result<f64, DecodeError> {
        let bytes = self.fixed::<8>()?;
        Ok(f64::from_le_bytes(bytes))
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        if self.remaining() < N {
            return Err(self.error(DecodeErrorKind::Truncated));
        }
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// `bytes` (or a `string`'s bytes): a length, then that many bytes.
    #[inline]
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let start = self.pos;
        let length = self.long()?;
        let n = usize::try_from(length)
            .map_err(|_| DecodeError::at(DecodeErrorKind::NegativeLength { length }, start))?;
        self.take(n)
    }

    /// A `string`: UTF-8 bytes.
    #[inline]
    pub(crate) fn string(&mut self) -> Result<&'a str, DecodeError> {
        let start = self.pos;
        let bytes = self.bytes()?;
        crate::utf8::text(bytes).ok_or_else(|| DecodeError::at(DecodeErrorKind::InvalidUtf8, start))
    }

    /// A union's branch: the index read, which must name one of `branches`.
    pub(crate) fn branch<'b, T>(&mut self, branches: &'b [T]) -> Result<&'b T, DecodeError> {
        let start = self.pos;
        let index = self.long()?;
        usize::try_from(index)
            .ok()
            .and_then(|i| branches.get(i))
            .ok_or_else(|| {
                DecodeError::at(
                    DecodeErrorKind::UnionIndex {
                        index,
                        branches: branches.len(),
                    },
                    start,
                )
            })
    }

    /// An enum's symbol: the index read (an `int`), which must name one of `symbols`.
    pub(crate) fn symbol<'s>(&mut self, symbols: &'s [String]) -> Result<&'s str, DecodeError> {
        let start = self.pos;
        let index = self.int()?;
        usize::try_from(index)
            .ok()
            .and_then(|i| symbols.get(i))
            .map(String::as_str)
            .ok_or_else(|| {
                DecodeError::at(
                    DecodeErrorKind::EnumIndex {
                        index: index.into(),
                        symbols: symbols.len(),
                    },
                    start,
                )
            })
    }

    /// A `decimal` on `fixed(n)` (`Some(n)`) or on `bytes`, as exact text.
    pub(crate) fn decimal(
        &mut self,
        fixed: Option<usize>,
        scale: usize,
    ) -> Result<String, DecodeError> {
        let start = self.pos;
        let bytes = match fixed {
            Some(n) => self.take(n)?,
            None => self.bytes()?,
        };
        decimal_text(bytes, scale).map_err(|kind| DecodeError::at(kind, start))
    }

    /// The item count of the next array or map block (0: the end). A negative count is
    /// followed by the block's byte size, which is read and ignored. Each item takes at
    /// least `min_item` bytes, so a count the rest of the datum cannot hold is refused
    /// before any item is read.
    pub(crate) fn block(&mut self, min_item: usize) -> Result<usize, DecodeError> {
        let start = self.pos;
        let raw = self.long()?;
        let count = if raw < 0 {
            self.long()?;
            raw.checked_neg()
                .ok_or_else(|| DecodeError::at(DecodeErrorKind::VarintOverflow, start))?
        } else {
            raw
        };
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        if count.saturating_mul(min_item.max(1)) > self.remaining() {
            return Err(DecodeError::at(DecodeErrorKind::Truncated, start));
        }
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_longs_decode() {
        let mut r = Reader::new(&[0x00, 0x01, 0x02, 0x7F, 0x80, 0x01]);
        assert_eq!(r.long().ok(), Some(0));
        assert_eq!(r.long().ok(), Some(-1));
        assert_eq!(r.long().ok(), Some(1));
        assert_eq!(r.long().ok(), Some(-64));
        assert_eq!(r.long().ok(), Some(64));
        assert_eq!(r.remaining(), 0);
        let too_long = [0xFFu8; 11];
        let error = Reader::new(&too_long).long().expect_err("overflow");
        assert_eq!(error.kind(), &DecodeErrorKind::VarintOverflow);
        let truncated = Reader::new(&[0x80]).long().expect_err("truncated");
        assert_eq!(truncated.kind(), &DecodeErrorKind::Truncated);
    }

    #[test]
    fn lengths_past_the_end_and_negative_lengths_are_refused() {
        let error = Reader::new(&[0x08, b'a']).bytes().expect_err("past end");
        assert_eq!(
            error.kind(),
            &DecodeErrorKind::LengthPastEnd {
                length: 4,
                remaining: 1
            }
        );
        let error = Reader::new(&[0x03]).bytes().expect_err("negative");
        assert_eq!(
            error.kind(),
            &DecodeErrorKind::NegativeLength { length: -2 }
        );
    }
}
