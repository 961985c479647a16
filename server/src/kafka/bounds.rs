//! A walk over a request body before the `kafka-protocol` crate decodes it: every array
//! count and string/bytes length must fit in the bytes that remain. The crate's array
//! decoder reserves `count` elements up front (`Vec::with_capacity`), so a 23-byte
//! Metadata request announcing 2^31 topics made it ask for 110 GB and abort the process
//! (found by the `kafka_request` fuzz target). The walk knows the layouts of the served
//! APIs and versions only (`versions::served`); it checks sizes, not meaning — the crate
//! still decodes and refuses what is malformed. No dependency on the rest of the pod: the
//! fuzz target compiles this file as is.

use kafka_protocol::messages::ApiKey;

/// One field of a request layout.
#[derive(Clone, Copy)]
enum F {
    I8,
    I16,
    I32,
    I64,
    Uuid,
    /// A (nullable) string: i16 length, or compact (varint length + 1) when flexible.
    Str,
    /// (Nullable) bytes: i32 length, or compact when flexible.
    Bytes,
    /// A (nullable) array of structs with these fields (+ tagged fields when flexible).
    Array(&'static [F]),
}

/// Checks that `body` (after the request header) of `api` at `version` announces no
/// array, string or bytes longer than the bytes that remain.
pub fn check(api: ApiKey, version: i16, body: &[u8]) -> Result<(), String> {
    let (fields, flexible): (&[F], bool) = match api {
        ApiKey::ApiVersions if version >= 3 => (&[F::Str, F::Str], true),
        ApiKey::ApiVersions => (&[], false),
        ApiKey::SaslHandshake => (&[F::Str], false),
        ApiKey::SaslAuthenticate => (&[F::Bytes], version >= 2),
        ApiKey::InitProducerId => match version {
            0 | 1 => (&[F::Str, F::I32], false),
            2 => (&[F::Str, F::I32], true),
            _ => (&[F::Str, F::I32, F::I64, F::I16], true),
        },
        ApiKey::Metadata => match version {
            0..=3 => (&[F::Array(&[F::Str])], false),
            4..=7 => (&[F::Array(&[F::Str]), F::I8], false),
            8 => (&[F::Array(&[F::Str]), F::I8, F::I8, F::I8], false),
            9 => (&[F::Array(&[F::Str]), F::I8, F::I8, F::I8], true),
            10 => (&[F::Array(&[F::Uuid, F::Str]), F::I8, F::I8, F::I8], true),
            _ => (&[F::Array(&[F::Uuid, F::Str]), F::I8, F::I8], true),
        },
        ApiKey::Produce => (
            &[
                F::Str,
                F::I16,
                F::I32,
                F::Array(&[F::Str, F::Array(&[F::I32, F::Bytes])]),
            ],
            version >= 9,
        ),
        _ => return Ok(()),
    };
    let mut walk = Walk {
        rest: body,
        flexible,
    };
    walk.fields(fields)?;
    walk.tags()
}

/// Checks `count` v2 records in `data` (a batch's records, decompressed): each record's
/// length, key, value and header count fit in the bytes that remain (the crate reserves
/// the header count up front, as it does array counts).
pub fn check_records(data: &[u8], count: usize) -> Result<(), String> {
    let mut rest = data;
    for i in 0..count {
        let len = zigzag(&mut rest)?;
        let len = usize::try_from(len)
            .ok()
            .filter(|&n| n <= rest.len())
            .ok_or_else(|| {
                format!(
                    "record {i} announces {len} bytes where {} remain",
                    rest.len()
                )
            })?;
        let (mut record, tail) = rest.split_at(len);
        rest = tail;
        record = record.get(1..).ok_or("record without attributes")?;
        zigzag(&mut record)?;
        zigzag(&mut record)?;
        for _ in 0..2 {
            let n = zigzag(&mut record)?;
            if n > 0 {
                let n = usize::try_from(n)
                    .ok()
                    .filter(|&n| n <= record.len())
                    .ok_or_else(|| {
                        format!("record {i}: a key or value of {n} bytes does not fit")
                    })?;
                record = &record[n..];
            }
        }
        let headers = zigzag(&mut record)?;
        if headers < 0 || headers as u64 > record.len() as u64 {
            return Err(format!(
                "record {i} announces {headers} headers in {} bytes",
                record.len()
            ));
        }
    }
    Ok(())
}

/// A zigzag varint (Kafka's record fields).
fn zigzag(rest: &mut &[u8]) -> Result<i64, String> {
    let mut value = 0u64;
    for shift in (0..70).step_by(7) {
        let (&b, tail) = rest.split_first().ok_or("varint cut short")?;
        *rest = tail;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok((value >> 1) as i64 ^ -((value & 1) as i64));
        }
    }
    Err("varint too long".into())
}

struct Walk<'a> {
    rest: &'a [u8],
    flexible: bool,
}

impl Walk<'_> {
    fn take(&mut self, n: usize) -> Result<(), String> {
        if n > self.rest.len() {
            return Err(format!(
                "announces {n} bytes where {} remain",
                self.rest.len()
            ));
        }
        self.rest = &self.rest[n..];
        Ok(())
    }

    fn int(&mut self, n: usize) -> Result<u64, String> {
        let bytes = self.rest.get(..n).ok_or("cut short")?;
        let value = bytes.iter().fold(0u64, |v, b| v << 8 | u64::from(*b));
        self.rest = &self.rest[n..];
        Ok(value)
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..35).step_by(7) {
            let (&b, rest) = self.rest.split_first().ok_or("varint cut short")?;
            self.rest = rest;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint too long".into())
    }

    /// A length (None: null); `width` bytes when not flexible (signed, -1 = null).
    fn length(&mut self, width: usize) -> Result<Option<u64>, String> {
        if self.flexible {
            return Ok(self.varint()?.checked_sub(1));
        }
        let raw = self.int(width)?;
        let negative = raw >> (width * 8 - 1) == 1;
        Ok((!negative).then_some(raw))
    }

    fn tags(&mut self) -> Result<(), String> {
        if !self.flexible {
            return Ok(());
        }
        let count = self.varint()?;
        if count > self.rest.len() as u64 {
            return Err(format!(
                "{count} tagged fields in {} bytes",
                self.rest.len()
            ));
        }
        for _ in 0..count {
            self.varint()?;
            let size = self.varint()?;
            self.take(usize::try_from(size).map_err(|_| "tag size")?)?;
        }
        Ok(())
    }

    fn fields(&mut self, fields: &[F]) -> Result<(), String> {
        for field in fields {
            match field {
                F::I8 => self.take(1)?,
                F::I16 => self.take(2)?,
                F::I32 => self.take(4)?,
                F::I64 => self.take(8)?,
                F::Uuid => self.take(16)?,
                F::Str => {
                    if let Some(n) = self.length(2)? {
                        self.take(usize::try_from(n).map_err(|_| "length")?)?;
                    }
                }
                F::Bytes => {
                    if let Some(n) = self.length(4)? {
                        self.take(usize::try_from(n).map_err(|_| "length")?)?;
                    }
                }
                F::Array(inner) => {
                    if let Some(count) = self.length(4)? {
                        // Every element takes at least one byte.
                        if count > self.rest.len() as u64 {
                            return Err(format!(
                                "array of {count} elements in {} bytes",
                                self.rest.len()
                            ));
                        }
                        for _ in 0..count {
                            self.fields(inner)?;
                            self.tags()?;
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_array_count_is_refused_before_the_crate_reserves_it() {
        // Metadata v0: topics array of i32::MAX strings in a few bytes.
        let body = [0x7f, 0xff, 0xff, 0xff, 0, 1, b'a'];
        let e = check(ApiKey::Metadata, 0, &body).expect_err("refused");
        assert!(e.contains("array of 2147483647 elements"), "{e}");
        // The same request with one topic passes.
        let ok = [0, 0, 0, 1, 0, 1, b'a'];
        assert!(check(ApiKey::Metadata, 0, &ok).is_ok());
        // Flexible (v12): compact array of 1 topic {uuid, compact string "a", tags}.
        let mut v12 = vec![2];
        v12.extend_from_slice(&[0; 16]);
        v12.extend_from_slice(&[2, b'a', 0, 1, 0, 0]);
        assert!(check(ApiKey::Metadata, 12, &v12).is_ok());
        v12[0] = 0xff;
        assert!(check(ApiKey::Metadata, 12, &v12).is_err());
    }

    #[test]
    fn a_huge_header_count_is_refused() {
        // length 11 (zigzag 22), attributes, ts 0, offset 0, key -1 (1), value 1 byte, 'x',
        // then 2^30 headers (zigzag varint).
        let record = [22, 0, 0, 0, 1, 2, b'x', 0x80, 0x80, 0x80, 0x80, 0x08];
        let e = check_records(&record[..], 1).expect_err("refused");
        assert!(e.contains("headers"), "{e}");
        let ok = [14, 0, 0, 0, 1, 2, b'x', 0];
        assert!(check_records(&ok, 1).is_ok());
    }
}
