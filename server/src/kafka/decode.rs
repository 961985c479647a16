//! Bytes from a Kafka client into typed requests: the request header and body (the
//! `kafka-protocol` crate's types) and a Produce partition's record batch (v2, its CRC
//! checked here, its records decompressed by Sluice's own bounded readers: gzip, snappy raw
//! or xerial-framed, LZ4 frames, zstd; the crate gets the batch uncompressed and never
//! decompresses). Nothing here allocates more than the caller's limit because of what a
//! stranger wrote: a batch inflates to at most `limit` bytes and its record count is checked
//! against the bytes before any record is decoded; array counts, lengths and header counts
//! are checked against the bytes by [`super::bounds`] before the crate reserves them. No
//! dependency on the rest of the pod: the `kafka_request` fuzz target compiles this file
//! (and `bounds.rs`) as is.

use std::io::Read;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use kafka_protocol::protocol::{decode_request_header_from_buffer, VersionRange};
use kafka_protocol::records::{Compression, Record, RecordBatchDecoder};

/// The smallest a v2 record can be on the wire: length, attributes, timestamp delta,
/// offset delta, key length, value length and header count, one byte each.
pub const MIN_RECORD_BYTES: usize = 7;
/// Positions in a v2 record batch header.
const LENGTH_OFFSET: usize = 8;
const MAGIC_OFFSET: usize = 16;
const CRC_OFFSET: usize = 17;
const ATTRIBUTES_OFFSET: usize = 21;
const PRODUCER_ID_OFFSET: usize = 43;
const PRODUCER_EPOCH_OFFSET: usize = 51;
const BASE_SEQUENCE_OFFSET: usize = 53;
const COUNT_OFFSET: usize = 57;
/// Length of a v2 batch header up to and including its record count.
const BATCH_HEADER_BYTES: usize = 61;
/// Attribute bits: the compression codec, a transactional batch, a control batch.
const CODEC_BITS: i16 = 0x07;
const TRANSACTIONAL_BIT: i16 = 0x10;
const CONTROL_BIT: i16 = 0x20;
/// The xerial snappy framing's magic (what the Java client writes).
const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";

/// Why bytes were refused.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// The frame is shorter than a request header.
    #[error("request of {0} bytes is shorter than its header")]
    Short(usize),
    /// An API key this crate does not know.
    #[error("unknown API key {0}")]
    UnknownApi(i16),
    /// The header or body does not decode.
    #[error("malformed {what}: {message}")]
    Malformed {
        /// What was being read.
        what: &'static str,
        /// The decoder's message.
        message: String,
    },
    /// The records inflate past the limit.
    #[error("the record batch inflates past {limit} bytes")]
    TooLarge {
        /// The limit in force.
        limit: usize,
    },
    /// The batch is not a single v2 record batch.
    #[error("{0}")]
    Batch(String),
}

/// One request: its header and, when this pod serves that API version, its body.
#[derive(Debug)]
pub struct Request {
    /// The header (API key and version, correlation id, client id).
    pub header: RequestHeader,
    /// The body; None when the version is outside `served` (the caller answers that).
    pub body: Option<RequestKind>,
}

/// Decodes one request frame (the bytes after the 4-byte size). `served` gives the
/// versions this pod answers per API key (None: the API is not served, body not decoded).
pub fn decode_request(
    frame: Bytes,
    served: impl Fn(ApiKey) -> Option<VersionRange>,
) -> Result<Request, DecodeError> {
    if frame.len() < 8 {
        return Err(DecodeError::Short(frame.len()));
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let api = ApiKey::try_from(key).map_err(|_| DecodeError::UnknownApi(key))?;
    let mut buf = frame;
    let header = decode_request_header_from_buffer(&mut buf).map_err(|e| malformed("header", e))?;
    let version = header.request_api_version;
    let body = match served(api) {
        Some(range) if version >= range.min && version <= range.max => {
            super::bounds::check(api, version, &buf).map_err(|e| malformed("request", e))?;
            Some(RequestKind::decode(api, &mut buf, version).map_err(|e| malformed("request", e))?)
        }
        _ => None,
    };
    Ok(Request { header, body })
}

fn malformed(what: &'static str, e: impl std::fmt::Display) -> DecodeError {
    DecodeError::Malformed {
        what,
        message: e.to_string(),
    }
}

/// A Produce partition's one record batch, decoded.
#[derive(Debug)]
pub struct Batch {
    /// The idempotent producer's id (-1: not idempotent).
    pub producer_id: i64,
    /// Its epoch.
    pub producer_epoch: i16,
    /// The sequence of the first record (-1: none).
    pub base_sequence: i32,
    /// Part of a transaction.
    pub transactional: bool,
    /// A control batch (transaction markers).
    pub control: bool,
    /// The codec the records came in.
    pub compression: Compression,
    /// The records in order.
    pub records: Vec<Record>,
}

/// Decodes `data` as exactly one v2 record batch whose records inflate to at most
/// `limit` bytes. The CRC is checked before anything else is read; a compressed batch's
/// records are inflated here, by Sluice's bounded readers, and handed to the crate as an
/// uncompressed batch (header rewritten: codec bits cleared, length and CRC recomputed), so
/// the crate never decompresses.
pub fn decode_batch(data: Bytes, limit: usize) -> Result<Batch, DecodeError> {
    if data.len() < BATCH_HEADER_BYTES {
        return Err(DecodeError::Batch(format!(
            "record batch of {} bytes is shorter than its header",
            data.len()
        )));
    }
    let magic = data[MAGIC_OFFSET] as i8;
    if magic != 2 {
        return Err(DecodeError::Batch(format!(
            "record batch magic {magic}: only v2 batches (Produce v3+) are accepted"
        )));
    }
    let declared = i32::from_be_bytes(field(&data, LENGTH_OFFSET));
    usize::try_from(declared)
        .ok()
        .and_then(|n| n.checked_add(LENGTH_OFFSET + 4))
        .filter(|&n| n == data.len())
        .ok_or_else(|| {
            DecodeError::Batch(format!(
                "exactly one record batch per partition is accepted (batch length {declared} \
                 in {} bytes)",
                data.len()
            ))
        })?;
    let carried = u32::from_be_bytes(field(&data, CRC_OFFSET));
    let computed = crc32c::crc32c(&data[ATTRIBUTES_OFFSET..]);
    if carried != computed {
        return Err(DecodeError::Batch(format!(
            "record batch CRC {computed:#010x} does not match the {carried:#010x} it carries"
        )));
    }
    let count = i32::from_be_bytes(field(&data, COUNT_OFFSET));
    let count = usize::try_from(count)
        .map_err(|_| DecodeError::Batch(format!("negative record count {count}")))?;
    let attributes = i16::from_be_bytes(field(&data, ATTRIBUTES_OFFSET));
    let compression = match attributes & CODEC_BITS {
        0 => Compression::None,
        1 => Compression::Gzip,
        2 => Compression::Snappy,
        3 => Compression::Lz4,
        4 => Compression::Zstd,
        n => return Err(DecodeError::Batch(format!("unknown compression codec {n}"))),
    };
    let records = inflate(data.slice(BATCH_HEADER_BYTES..), compression, limit)?;
    if count.saturating_mul(MIN_RECORD_BYTES) > records.len() {
        return Err(DecodeError::Batch(format!(
            "{count} records cannot fit in {} bytes of records",
            records.len()
        )));
    }
    super::bounds::check_records(&records, count).map_err(DecodeError::Batch)?;
    let mut plain = match compression {
        Compression::None => data.clone(),
        _ => uncompressed(&data, &records)?,
    };
    let set = RecordBatchDecoder::decode(&mut plain).map_err(|e| malformed("record batch", e))?;
    Ok(Batch {
        producer_id: i64::from_be_bytes(field(&data, PRODUCER_ID_OFFSET)),
        producer_epoch: i16::from_be_bytes(field(&data, PRODUCER_EPOCH_OFFSET)),
        base_sequence: i32::from_be_bytes(field(&data, BASE_SEQUENCE_OFFSET)),
        transactional: attributes & TRANSACTIONAL_BIT != 0,
        control: attributes & CONTROL_BIT != 0,
        compression,
        records: set.records,
    })
}

/// The `N` bytes of the batch header at `offset` (the caller checked the header's length).
fn field<const N: usize>(data: &[u8], offset: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&data[offset..offset + N]);
    out
}

/// `header`'s batch with `records` as its uncompressed records: codec bits cleared, batch
/// length and CRC recomputed.
fn uncompressed(header: &[u8], records: &[u8]) -> Result<Bytes, DecodeError> {
    let mut out = BytesMut::with_capacity(BATCH_HEADER_BYTES + records.len());
    out.extend_from_slice(&header[..BATCH_HEADER_BYTES]);
    out.extend_from_slice(records);
    let length = i32::try_from(out.len() - LENGTH_OFFSET - 4)
        .map_err(|_| DecodeError::Batch(format!("{} bytes of records", records.len())))?;
    out[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&length.to_be_bytes());
    let attributes = i16::from_be_bytes(field(&out, ATTRIBUTES_OFFSET)) & !CODEC_BITS;
    out[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    let crc = crc32c::crc32c(&out[ATTRIBUTES_OFFSET..]);
    out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(out.freeze())
}

/// The records section of a batch, decompressed into at most `limit` bytes.
fn inflate(input: Bytes, codec: Compression, limit: usize) -> Result<Bytes, DecodeError> {
    match codec {
        Compression::None => {
            if input.len() > limit {
                return Err(DecodeError::TooLarge { limit });
            }
            Ok(input)
        }
        Compression::Gzip => read_bounded(flate2::read::GzDecoder::new(&input[..]), limit),
        Compression::Zstd => read_bounded(
            zstd::stream::read::Decoder::new(&input[..]).map_err(decompressing)?,
            limit,
        ),
        Compression::Lz4 => read_bounded(lz4_flex::frame::FrameDecoder::new(&input[..]), limit),
        Compression::Snappy => snappy(&input, limit),
    }
}

fn decompressing(e: impl std::fmt::Display) -> DecodeError {
    DecodeError::Batch(format!("decompressing: {e}"))
}

/// Reads `reader` to its end, refusing more than `limit` bytes.
fn read_bounded(reader: impl Read, limit: usize) -> Result<Bytes, DecodeError> {
    let mut out = Vec::new();
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(decompressing)?;
    if out.len() > limit {
        return Err(DecodeError::TooLarge { limit });
    }
    Ok(Bytes::from(out))
}

/// Snappy as Kafka clients write it: raw (librdkafka) or xerial-framed (the Java client):
/// the magic, two version words, then `u32 length | raw snappy block` repeated.
fn snappy(input: &[u8], limit: usize) -> Result<Bytes, DecodeError> {
    let too_large = || DecodeError::TooLarge { limit };
    let mut decoder = snap::raw::Decoder::new();
    if !input.starts_with(XERIAL_MAGIC) {
        if snap::raw::decompress_len(input).map_err(decompressing)? > limit {
            return Err(too_large());
        }
        return Ok(Bytes::from(
            decoder.decompress_vec(input).map_err(decompressing)?,
        ));
    }
    let cut = |what: &str| DecodeError::Batch(format!("xerial snappy {what} cut short"));
    let mut rest = input.get(16..).ok_or_else(|| cut("header"))?;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| cut("block length"))?;
        let len = u32::from_be_bytes(*len) as usize;
        let block = tail.get(..len).ok_or_else(|| cut("block"))?;
        let size = snap::raw::decompress_len(block).map_err(decompressing)?;
        if out.len().saturating_add(size) > limit {
            return Err(too_large());
        }
        let start = out.len();
        out.resize(start + size, 0);
        decoder
            .decompress(block, &mut out[start..])
            .map_err(decompressing)?;
        rest = &tail[len..];
    }
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use indexmap::IndexMap;
    use kafka_protocol::records::{RecordBatchEncoder, RecordEncodeOptions, TimestampType};

    fn record(i: i64, value: &[u8]) -> Record {
        Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: 7,
            producer_epoch: 1,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: 10 + i as i32,
            timestamp: 1_700_000_000_000 + i,
            key: Some(Bytes::from_static(b"k")),
            value: Some(Bytes::copy_from_slice(value)),
            headers: IndexMap::new(),
        }
    }

    fn encode(records: &[Record], compression: Compression) -> Bytes {
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression,
        };
        RecordBatchEncoder::encode_with_custom_compression(
            &mut buf,
            records.iter(),
            &options,
            Some(|raw: &mut BytesMut, out: &mut BytesMut, c: Compression| {
                use std::io::Write;
                let data: Vec<u8> = match c {
                    Compression::None => raw.to_vec(),
                    Compression::Gzip => {
                        let mut e = flate2::write::GzEncoder::new(
                            Vec::new(),
                            flate2::Compression::default(),
                        );
                        e.write_all(raw)?;
                        e.finish()?
                    }
                    Compression::Zstd => zstd::encode_all(&raw[..], 3)?,
                    Compression::Lz4 => {
                        let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
                        e.write_all(raw)?;
                        e.finish()?
                    }
                    Compression::Snappy => snap::raw::Encoder::new().compress_vec(raw)?,
                };
                out.extend_from_slice(&data);
                Ok(())
            }),
        )
        .expect("encode");
        buf.freeze()
    }

    #[test]
    fn every_codec_round_trips() {
        let records: Vec<Record> = (0..20).map(|i| record(i, b"{\"a\":1}")).collect();
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let batch = decode_batch(encode(&records, codec), 1 << 20).expect("decodes");
            assert_eq!(batch.compression, codec);
            assert_eq!(batch.producer_id, 7);
            assert_eq!(batch.base_sequence, 10);
            assert_eq!(batch.records.len(), 20);
            assert_eq!(batch.records[3].value.as_deref(), Some(&b"{\"a\":1}"[..]));
        }
    }

    #[test]
    fn a_batch_inflating_past_the_limit_is_refused() {
        let big = vec![b' '; 100_000];
        let records = vec![record(0, &big)];
        for codec in [Compression::Gzip, Compression::Zstd, Compression::Lz4] {
            let wire = encode(&records, codec);
            assert!(wire.len() < 10_000, "{codec:?} compresses");
            assert_eq!(
                decode_batch(wire, 50_000).expect_err("too large"),
                DecodeError::TooLarge { limit: 50_000 }
            );
        }
    }

    #[test]
    fn two_batches_or_a_cut_batch_are_refused() {
        let one = encode(&[record(0, b"{}")], Compression::None);
        let mut two = BytesMut::from(&one[..]);
        two.extend_from_slice(&one);
        assert!(matches!(
            decode_batch(two.freeze(), 1 << 20),
            Err(DecodeError::Batch(_))
        ));
        assert!(decode_batch(one.slice(..one.len() - 1), 1 << 20).is_err());
    }

    #[test]
    fn a_record_count_beyond_the_bytes_is_refused_before_decoding() {
        let mut wire = BytesMut::from(&encode(&[record(0, b"{}")], Compression::None)[..]);
        wire[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        // Fix the CRC (over attributes..end) so the count check is what refuses it.
        let crc = crc32c::crc32c(&wire[21..]);
        wire[17..21].copy_from_slice(&crc.to_be_bytes());
        let e = decode_batch(wire.freeze(), 1 << 20).expect_err("refused");
        assert!(e.to_string().contains("cannot fit"), "{e}");
    }
}

#[cfg(test)]
mod fuzz_finds {
    use super::*;

    #[test]
    fn a_metadata_request_announcing_2_pow_31_topics_is_refused_without_allocating() {
        // Found by the kafka_request fuzz target: the crate reserved 110 GB and aborted.
        let frame = Bytes::from_static(&[
            0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 91, 91, 91, 0, 0, 0, 0, 48, 0, 0, 0, 0,
        ]);
        let e =
            decode_request(frame, |_| Some(VersionRange { min: 0, max: 12 })).expect_err("refused");
        assert!(e.to_string().contains("elements"), "{e}");
    }
}
