//! The payloads Sluice writes into WAL frames, and their decoding for replay.
//!
//! ```text
//! kind 1, stream open:  u64 stream_key | u16 table_len | table (UTF-8)
//!                       | u8 record_type (1 proto, 2 json, 3 arrow, 4 avro) | u32 desc_len
//!                       | descriptor
//!                       [ | u8 tag 1 | u16 id_len | persistent stream id (UTF-8) ]
//! kind 2, records:      u64 stream_key | u32 count
//!                       | count × ( i64 offset | u32 len | record bytes )
//! kind 3, keyed records: u16 key_len | idempotency key (UTF-8) | i64 received_at_ms
//!                       | a kind-2 payload (one REST request with an `Idempotency-Key`)
//! kind 4, keys:         u32 count | count × ( u16 table_len | table | u16 key_len | key
//!                       | i64 received_at_ms )  (keys re-logged before a purge)
//! kind 5, arrow batch:  u64 stream_key | i64 offset | u32 rows | u32 count
//!                       | count × ( u32 header_len | header | u32 body_len | body )
//! kind 6, OTLP export:  u16 table_len | table | u8 signal (1 traces, 2 logs, 3 metrics)
//!                       | u64 stream_key | i64 first_offset | i64 received_at_us
//!                       | the Export*ServiceRequest protobuf (to the end)
//! kind 7, MQTT QoS 2 records: u16 count | count × ( u16 client_len | client id | u16 packet id )
//!                       | a kind-2 payload (a gathered MQTT write holding QoS 2 publishes)
//! kind 8, MQTT QoS 2 ids: u8 state (1 received, 2 released) | u32 count
//!                       | count × ( u16 client_len | client id | u16 packet id )
//! ```
//! A kind-7 frame makes the (client id, packet id) pairs of its QoS 2 publishes durable
//! in the same fsync as their records (never one without the other); a kind-8 frame
//! either releases pairs (logged and made durable before PUBCOMP) or lists the pairs
//! still received, logged again before a purge. Replay folds them, in log order, into
//! the ids each client id has received and not released.
//! An Avro stream's open frame carries, as its descriptor, the producer's writer schema
//! (`avro_schema_json`, UTF-8), and its records frames the raw datums, so replay compiles
//! the same plan and decodes the same bytes.
//! An OTLP export frame stands alone (no stream-open frame): it names its table and
//! signal, and its request is transcoded again at replay with the same offsets and
//! arrival time, so replayed rows equal the live ones.
//! An Arrow stream's open frame carries, as its descriptor, the producer's IPC schema
//! message (the flatbuffer `Message` of its first `FlightData`). An arrow-batch frame holds
//! the Arrow IPC messages of one Flight batch exactly as the producer sent them (body
//! compression included): the dictionary batches the record batch needs (all of them, so a
//! frame decodes without any earlier frame), then the record batch, last.
//! The bracketed tail is present only on the open frame of a persistent stream's
//! connection (each connection logs its own open frame with its own key); frames written
//! before persistent streams existed end after the descriptor and decode as ephemeral.
//! All integers little endian. A stream-open frame precedes the stream's first
//! records frame, so replay can re-parse raw records without the producer; it
//! is re-logged before the segment holding it is purged while still needed.
//!
//! This file depends on nothing else in the crate (its errors are its own
//! [`FrameError`]), so the `wal_payloads` fuzz target compiles it as is.

/// Result of decoding a payload.
pub type Result<T, E = FrameError> = std::result::Result<T, E>;

/// A WAL payload that does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The payload ends inside a field.
    #[error("WAL payload: truncated")]
    Truncated,
    /// A stream-open payload's table name is not UTF-8.
    #[error("WAL payload: table name is not UTF-8")]
    TableNotUtf8,
    /// A stream-open payload names a record format Sluice never writes.
    #[error("WAL payload: unknown record format {0}")]
    UnknownFormat(u8),
    /// A stream-open payload's optional tail has a tag Sluice never writes.
    #[error("WAL payload: unknown stream-open tail tag {0}")]
    UnknownTail(u8),
    /// A persistent stream id, an idempotency key or an MQTT client id is not UTF-8.
    #[error("WAL payload: a stream id, idempotency key or client id is not UTF-8")]
    IdNotUtf8,
    /// An arrow-batch or MQTT ids payload has bytes after its last item.
    #[error("WAL payload: bytes after the last item")]
    Trailing,
    /// An MQTT ids payload says a state Sluice never writes.
    #[error("WAL payload: unknown MQTT QoS 2 state {0}")]
    UnknownQos2State(u8),
}

/// Tag of the stream-open tail that carries a persistent stream id.
const TAIL_PERSISTENT_ID: u8 = 1;
/// Tail of a stream-open frame: the table's columns at the open (u32 length, SQL text).
const TAIL_COLUMNS: u8 = 2;

/// WAL frame kind of a stream-open payload.
pub const KIND_STREAM_OPEN: u8 = 1;
/// WAL frame kind of a records payload.
pub const KIND_RECORDS: u8 = 2;
/// WAL frame kind of an Arrow batch payload.
pub const KIND_ARROW: u8 = 5;

/// WAL frame kind of one OTLP export request.
pub const KIND_OTLP: u8 = 6;

/// WAL frame kind of a records payload that carries a REST request's idempotency key.
pub const KIND_KEYED_RECORDS: u8 = 3;
/// WAL frame kind of a list of idempotency keys still inside their window.
pub const KIND_KEYS: u8 = 4;

/// WAL frame kind of a records payload carrying the MQTT QoS 2 (client id, packet id)
/// pairs of the publishes in it.
pub const KIND_MQTT_RECORDS: u8 = 7;
/// WAL frame kind of a list of MQTT QoS 2 pairs received or released.
pub const KIND_MQTT_IDS: u8 = 8;

/// An MQTT QoS 2 publish as the WAL keeps it: its client id and packet id.
pub type Qos2Pair = (String, u16);

/// What a kind-8 frame says of its pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Qos2State {
    /// Written and not released (a list logged again before a purge).
    Received,
    /// Released by PUBREL (logged before PUBCOMP).
    Released,
}

fn put_pairs(out: &mut Vec<u8>, pairs: &[Qos2Pair]) {
    for (client, id) in pairs {
        let client = &client.as_bytes()[..client.len().min(u16::MAX as usize)];
        out.extend_from_slice(&(client.len() as u16).to_le_bytes());
        out.extend_from_slice(client);
        out.extend_from_slice(&id.to_le_bytes());
    }
}

fn take_pairs(r: &mut Reader<'_>, count: usize) -> Result<Vec<Qos2Pair>> {
    let mut pairs = Vec::with_capacity(count.min(r.bytes.len() / 4 + 1));
    for _ in 0..count {
        let client = r.text()?;
        pairs.push((client, r.u16()?));
    }
    Ok(pairs)
}

/// Bytes a kind-7 frame adds to its records payload for `pairs`: 2 + Σ (4 + client id).
pub fn mqtt_prefix_len(pairs: &[Qos2Pair]) -> usize {
    2 + pairs.iter().map(|(c, _)| 4 + c.len()).sum::<usize>()
}

/// Prefixes a records payload with the QoS 2 pairs of its publishes (kind 7; at most
/// `u16::MAX` pairs, which a gathered write never exceeds).
pub fn encode_mqtt_records(pairs: &[Qos2Pair], records_payload: &[u8]) -> Vec<u8> {
    let pairs = &pairs[..pairs.len().min(u16::MAX as usize)];
    let mut out = Vec::with_capacity(mqtt_prefix_len(pairs) + records_payload.len());
    out.extend_from_slice(&(pairs.len() as u16).to_le_bytes());
    put_pairs(&mut out, pairs);
    out.extend_from_slice(records_payload);
    out
}

/// Splits a kind-7 payload into its pairs and the records payload after them.
pub fn decode_mqtt_records(bytes: &[u8]) -> Result<(Vec<Qos2Pair>, &[u8])> {
    let mut r = Reader { bytes, pos: 0 };
    let count = r.u16()? as usize;
    let pairs = take_pairs(&mut r, count)?;
    Ok((pairs, &bytes[r.pos..]))
}

/// Encodes a list of pairs received or released (kind 8).
pub fn encode_mqtt_ids(state: Qos2State, pairs: &[Qos2Pair]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + pairs.iter().map(|(c, _)| 4 + c.len()).sum::<usize>());
    out.push(match state {
        Qos2State::Received => 1,
        Qos2State::Released => 2,
    });
    out.extend_from_slice(&(pairs.len() as u32).to_le_bytes());
    put_pairs(&mut out, pairs);
    out
}

/// Decodes a kind-8 payload.
pub fn decode_mqtt_ids(bytes: &[u8]) -> Result<(Qos2State, Vec<Qos2Pair>)> {
    let mut r = Reader { bytes, pos: 0 };
    let state = match r.u8()? {
        1 => Qos2State::Received,
        2 => Qos2State::Released,
        other => return Err(FrameError::UnknownQos2State(other)),
    };
    let count = r.u32()? as usize;
    let pairs = take_pairs(&mut r, count)?;
    if r.pos != bytes.len() {
        return Err(FrameError::Trailing);
    }
    Ok((state, pairs))
}

/// How a stream's records are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordFormat {
    /// Protobuf, per the stream's descriptor.
    Proto,
    /// One JSON object per record.
    Json,
    /// Arrow IPC record batches (Arrow Flight `DoPut`), per the stream's IPC schema.
    Arrow,
    /// Raw Avro datums, per the stream's writer schema.
    Avro,
}

impl RecordFormat {
    fn code(self) -> u8 {
        match self {
            RecordFormat::Proto => 1,
            RecordFormat::Json => 2,
            RecordFormat::Arrow => 3,
            RecordFormat::Avro => 4,
        }
    }
}

/// A stream-open frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamOpen {
    /// Key of the stream inside this WAL.
    pub stream_key: u64,
    /// Full table name.
    pub table: String,
    /// Record encoding.
    pub format: RecordFormat,
    /// Encoded DescriptorProto (empty for JSON; the IPC schema message for Arrow; the
    /// writer schema's JSON text for Avro).
    pub descriptor: Vec<u8>,
    /// The persistent stream this connection writes (None: an ephemeral stream).
    pub persistent_id: Option<String>,
    /// The table's columns (SQL) when the stream opened, which its rows were
    /// built for: replay parses a record under them when the table's columns
    /// no longer take it (a column dropped or renamed since; None: not
    /// recorded, frames of older versions).
    pub columns: Option<String>,
}

impl StreamOpen {
    /// Encodes the payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(19 + self.table.len() + self.descriptor.len());
        out.extend_from_slice(&self.stream_key.to_le_bytes());
        let table = self.table.as_bytes();
        let table = &table[..table.len().min(u16::MAX as usize)];
        out.extend_from_slice(&(table.len() as u16).to_le_bytes());
        out.extend_from_slice(table);
        out.push(self.format.code());
        out.extend_from_slice(&(self.descriptor.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.descriptor);
        if let Some(id) = &self.persistent_id {
            let id = id.as_bytes();
            let id = &id[..id.len().min(u16::MAX as usize)];
            out.push(TAIL_PERSISTENT_ID);
            out.extend_from_slice(&(id.len() as u16).to_le_bytes());
            out.extend_from_slice(id);
        }
        if let Some(columns) = &self.columns {
            out.push(TAIL_COLUMNS);
            out.extend_from_slice(&(columns.len() as u32).to_le_bytes());
            out.extend_from_slice(columns.as_bytes());
        }
        out
    }

    /// Decodes a payload.
    pub fn decode(bytes: &[u8]) -> Result<StreamOpen> {
        let mut r = Reader { bytes, pos: 0 };
        let stream_key = r.u64()?;
        let table_len = r.u16()? as usize;
        let table =
            String::from_utf8(r.take(table_len)?.to_vec()).map_err(|_| FrameError::TableNotUtf8)?;
        let format = match r.u8()? {
            1 => RecordFormat::Proto,
            2 => RecordFormat::Json,
            3 => RecordFormat::Arrow,
            4 => RecordFormat::Avro,
            other => return Err(FrameError::UnknownFormat(other)),
        };
        let desc_len = r.u32()? as usize;
        let descriptor = r.take(desc_len)?.to_vec();
        let (mut persistent_id, mut columns) = (None, None);
        while r.pos < bytes.len() {
            match r.u8()? {
                TAIL_PERSISTENT_ID => {
                    let len = r.u16()? as usize;
                    let id = String::from_utf8(r.take(len)?.to_vec())
                        .map_err(|_| FrameError::IdNotUtf8)?;
                    persistent_id = Some(id);
                }
                TAIL_COLUMNS => {
                    let len = r.u32()? as usize;
                    let text = String::from_utf8(r.take(len)?.to_vec())
                        .map_err(|_| FrameError::IdNotUtf8)?;
                    columns = Some(text);
                }
                other => return Err(FrameError::UnknownTail(other)),
            }
        }
        Ok(StreamOpen {
            stream_key,
            table,
            format,
            descriptor,
            persistent_id,
            columns,
        })
    }
}

/// Encodes a records payload from `(offset, record)` pairs.
pub fn encode_records<'a>(
    stream_key: u64,
    records: impl ExactSizeIterator<Item = (i64, &'a [u8])> + Clone,
) -> Vec<u8> {
    let size: usize = records.clone().map(|(_, r)| 12 + r.len()).sum();
    let mut out = Vec::with_capacity(12 + size);
    out.extend_from_slice(&stream_key.to_le_bytes());
    out.extend_from_slice(&(records.len() as u32).to_le_bytes());
    for (offset, record) in records {
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&(record.len() as u32).to_le_bytes());
        out.extend_from_slice(record);
    }
    out
}

/// A decoded records payload, borrowing the record bytes.
pub struct RecordsFrame<'a> {
    /// Key of the stream.
    pub stream_key: u64,
    /// `(offset, record)` pairs in order.
    pub records: Vec<(i64, &'a [u8])>,
}

/// Decodes a records payload.
pub fn decode_records(bytes: &[u8]) -> Result<RecordsFrame<'_>> {
    let mut r = Reader { bytes, pos: 0 };
    let stream_key = r.u64()?;
    let count = r.u32()? as usize;
    let mut records = Vec::with_capacity(count.min(bytes.len() / 12 + 1));
    for _ in 0..count {
        let offset = r.u64()? as i64;
        let len = r.u32()? as usize;
        records.push((offset, r.take(len)?));
    }
    Ok(RecordsFrame {
        stream_key,
        records,
    })
}

/// An idempotency key as the WAL keeps it: the table, the key, when its request came.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRecord {
    /// Full table name.
    pub table: String,
    /// The client's `Idempotency-Key`.
    pub key: String,
    /// When the request that wrote it arrived (ms since the epoch).
    pub at_ms: i64,
}

/// Prefixes a records payload with its request's idempotency key (kind 3).
pub fn encode_keyed(key: &str, at_ms: i64, records_payload: &[u8]) -> Vec<u8> {
    let key = &key.as_bytes()[..key.len().min(u16::MAX as usize)];
    let mut out = Vec::with_capacity(10 + key.len() + records_payload.len());
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&at_ms.to_le_bytes());
    out.extend_from_slice(records_payload);
    out
}

/// Splits a kind-3 payload into its key, its time and the records payload after them.
pub fn decode_keyed(bytes: &[u8]) -> Result<(String, i64, &[u8])> {
    let mut r = Reader { bytes, pos: 0 };
    let key = r.text()?;
    let at_ms = r.u64()? as i64;
    Ok((key, at_ms, &bytes[r.pos..]))
}

/// Encodes a list of keys (kind 4).
pub fn encode_keys(keys: &[KeyRecord]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(keys.len() as u32).to_le_bytes());
    for k in keys {
        for text in [&k.table, &k.key] {
            let text = &text.as_bytes()[..text.len().min(u16::MAX as usize)];
            out.extend_from_slice(&(text.len() as u16).to_le_bytes());
            out.extend_from_slice(text);
        }
        out.extend_from_slice(&k.at_ms.to_le_bytes());
    }
    out
}

/// One Arrow IPC message: its flatbuffer header and its body.
pub type IpcMessage<'a> = (&'a [u8], &'a [u8]);

/// Encodes an arrow-batch payload: the batch's `rows` at Flight `offset`, its IPC
/// `messages` (dictionary batches, then the record batch).
pub fn encode_arrow<'a>(
    stream_key: u64,
    offset: i64,
    rows: u32,
    messages: impl ExactSizeIterator<Item = IpcMessage<'a>> + Clone,
) -> Vec<u8> {
    let size: usize = messages.clone().map(|(h, b)| 8 + h.len() + b.len()).sum();
    let mut out = Vec::with_capacity(24 + size);
    out.extend_from_slice(&stream_key.to_le_bytes());
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(&rows.to_le_bytes());
    out.extend_from_slice(&(messages.len() as u32).to_le_bytes());
    for (header, body) in messages {
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        out.extend_from_slice(header);
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(body);
    }
    out
}

/// Decodes a list of keys (kind 4).
pub fn decode_keys(bytes: &[u8]) -> Result<Vec<KeyRecord>> {
    let mut r = Reader { bytes, pos: 0 };
    let count = r.u32()? as usize;
    let mut keys = Vec::with_capacity(count.min(bytes.len() / 12 + 1));
    for _ in 0..count {
        let table = r.text()?;
        let key = r.text()?;
        let at_ms = r.u64()? as i64;
        keys.push(KeyRecord { table, key, at_ms });
    }
    Ok(keys)
}

/// A decoded arrow-batch payload, borrowing the IPC messages.
#[derive(Debug, PartialEq, Eq)]
pub struct ArrowFrame<'a> {
    /// Key of the stream.
    pub stream_key: u64,
    /// The batch's Flight offset.
    pub offset: i64,
    /// Rows in the batch.
    pub rows: u32,
    /// Dictionary batches, then the record batch.
    pub messages: Vec<IpcMessage<'a>>,
}

/// Decodes an arrow-batch payload (the IPC messages are not looked into).
pub fn decode_arrow(bytes: &[u8]) -> Result<ArrowFrame<'_>> {
    let mut r = Reader { bytes, pos: 0 };
    let stream_key = r.u64()?;
    let offset = r.u64()? as i64;
    let rows = r.u32()?;
    let count = r.u32()? as usize;
    let mut messages = Vec::with_capacity(count.min(bytes.len() / 8 + 1));
    for _ in 0..count {
        let header_len = r.u32()? as usize;
        let header = r.take(header_len)?;
        let body_len = r.u32()? as usize;
        messages.push((header, r.take(body_len)?));
    }
    if r.pos != bytes.len() {
        return Err(FrameError::Trailing);
    }
    Ok(ArrowFrame {
        stream_key,
        offset,
        rows,
        messages,
    })
}

/// An OTLP export frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OtlpFrame<'a> {
    /// Full table name.
    pub table: String,
    /// 1 traces, 2 logs, 3 metrics.
    pub signal: u8,
    /// The pod process's OTLP stream key (system columns, record ids).
    pub stream_key: u64,
    /// Offset of the request's first item (item `i` has `first_offset + i`).
    pub first_offset: i64,
    /// When the pod received the request, µs since the epoch.
    pub received_at_us: i64,
    /// The request, protobuf-encoded.
    pub request: &'a [u8],
}

/// Encodes an OTLP export payload.
pub fn encode_otlp(frame: &OtlpFrame<'_>) -> Vec<u8> {
    let table = frame.table.as_bytes();
    let table = &table[..table.len().min(u16::MAX as usize)];
    let mut out = Vec::with_capacity(2 + table.len() + 1 + 24 + frame.request.len());
    out.extend_from_slice(&(table.len() as u16).to_le_bytes());
    out.extend_from_slice(table);
    out.push(frame.signal);
    out.extend_from_slice(&frame.stream_key.to_le_bytes());
    out.extend_from_slice(&frame.first_offset.to_le_bytes());
    out.extend_from_slice(&frame.received_at_us.to_le_bytes());
    out.extend_from_slice(frame.request);
    out
}

/// Decodes an OTLP export payload (the request is not looked into).
pub fn decode_otlp(bytes: &[u8]) -> Result<OtlpFrame<'_>> {
    let mut r = Reader { bytes, pos: 0 };
    let table_len = r.u16()? as usize;
    let table =
        String::from_utf8(r.take(table_len)?.to_vec()).map_err(|_| FrameError::TableNotUtf8)?;
    let signal = r.u8()?;
    let stream_key = r.u64()?;
    let first_offset = r.u64()? as i64;
    let received_at_us = r.u64()? as i64;
    Ok(OtlpFrame {
        table,
        signal,
        stream_key,
        first_offset,
        received_at_us,
        request: &bytes[r.pos..],
    })
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        match end {
            Some(end) => {
                let out = &self.bytes[self.pos..end];
                self.pos = end;
                Ok(out)
            }
            None => Err(FrameError::Truncated),
        }
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn text(&mut self) -> Result<String> {
        let len = self.u16()? as usize;
        String::from_utf8(self.take(len)?.to_vec()).map_err(|_| FrameError::IdNotUtf8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_otlp_frame_round_trips_and_a_cut_one_is_truncated() {
        let frame = OtlpFrame {
            table: "o.t.spans".into(),
            signal: 1,
            stream_key: 7,
            first_offset: 1 << 40,
            received_at_us: -3,
            request: b"\x0a\x00",
        };
        let bytes = encode_otlp(&frame);
        assert_eq!(decode_otlp(&bytes).expect("decode"), frame);
        assert_eq!(decode_otlp(&bytes[..20]), Err(FrameError::Truncated));
    }

    #[test]
    fn stream_open_round_trips() {
        let open = StreamOpen {
            stream_key: 42,
            table: "a.b.c".into(),
            format: RecordFormat::Proto,
            descriptor: vec![1, 2, 3],
            persistent_id: None,
            columns: None,
        };
        assert_eq!(StreamOpen::decode(&open.encode()).expect("decode"), open);
        let with_columns = StreamOpen {
            persistent_id: Some("p".into()),
            columns: Some("id BIGINT NOT NULL, note STRING".into()),
            ..open.clone()
        };
        assert_eq!(
            StreamOpen::decode(&with_columns.encode()).expect("decode"),
            with_columns
        );
        let avro = StreamOpen {
            format: RecordFormat::Avro,
            descriptor: br#"{"type":"record","name":"R","fields":[]}"#.to_vec(),
            ..open.clone()
        };
        assert_eq!(StreamOpen::decode(&avro.encode()).expect("decode"), avro);
        assert_eq!(
            StreamOpen::decode(&open.encode()[..5]),
            Err(FrameError::Truncated)
        );
        let mut bad_format = open.encode();
        bad_format[8 + 2 + 5] = 9;
        assert_eq!(
            StreamOpen::decode(&bad_format),
            Err(FrameError::UnknownFormat(9))
        );
    }

    #[test]
    fn a_persistent_stream_open_carries_its_id_and_old_frames_stay_ephemeral() {
        let ephemeral = StreamOpen {
            stream_key: 7,
            table: "a.b.c".into(),
            format: RecordFormat::Json,
            descriptor: Vec::new(),
            persistent_id: None,
            columns: None,
        };
        let persistent = StreamOpen {
            persistent_id: Some("0b7e-id".into()),
            ..ephemeral.clone()
        };
        let old_bytes = ephemeral.encode();
        let new_bytes = persistent.encode();
        assert!(
            new_bytes.starts_with(&old_bytes),
            "the id is a tail after the old layout"
        );
        assert_eq!(
            StreamOpen::decode(&old_bytes).expect("old frame"),
            ephemeral
        );
        assert_eq!(
            StreamOpen::decode(&new_bytes).expect("new frame"),
            persistent
        );
        let mut bad_tag = new_bytes.clone();
        bad_tag[old_bytes.len()] = 9;
        assert_eq!(
            StreamOpen::decode(&bad_tag),
            Err(FrameError::UnknownTail(9))
        );
        assert_eq!(
            StreamOpen::decode(&new_bytes[..new_bytes.len() - 1]),
            Err(FrameError::Truncated)
        );
    }

    #[test]
    fn records_round_trip_and_truncation_is_an_error() {
        let recs: Vec<(i64, &[u8])> = vec![(0, b"ab"), (1, b""), (7, b"xyz")];
        let bytes = encode_records(9, recs.iter().copied());
        let frame = decode_records(&bytes).expect("decode");
        assert_eq!(frame.stream_key, 9);
        assert_eq!(frame.records, recs);
        assert!(decode_records(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn keyed_records_and_key_lists_round_trip() {
        let records = encode_records(3, [(5i64, &b"{}"[..])].into_iter());
        let keyed = encode_keyed("retry-1", 1_700_000_000_000, &records);
        let (key, at, rest) = decode_keyed(&keyed).expect("decode");
        assert_eq!(
            (key.as_str(), at, rest),
            ("retry-1", 1_700_000_000_000, &records[..])
        );
        assert!(decode_keyed(&keyed[..4]).is_err());
        let keys = vec![
            KeyRecord {
                table: "a.b.c".into(),
                key: "k1".into(),
                at_ms: 1,
            },
            KeyRecord {
                table: "a.b.d".into(),
                key: String::new(),
                at_ms: -2,
            },
        ];
        let bytes = encode_keys(&keys);
        assert_eq!(decode_keys(&bytes).expect("decode"), keys);
        assert_eq!(
            decode_keys(&bytes[..bytes.len() - 1]),
            Err(FrameError::Truncated)
        );
    }

    #[test]
    fn mqtt_frames_refuse_an_unknown_state_and_a_cut_pair() {
        let pairs = vec![("dev-1".to_string(), 7u16)];
        let mut ids = encode_mqtt_ids(Qos2State::Received, &pairs);
        ids[0] = 9;
        assert_eq!(decode_mqtt_ids(&ids), Err(FrameError::UnknownQos2State(9)));
        let records = encode_records(3, [(5i64, &b"{}"[..])].into_iter());
        let bytes = encode_mqtt_records(&pairs, &records);
        // 2 (count) + 2 (length) + 5 (client id) + 2 (packet id) before the records.
        assert_eq!(bytes.len() - records.len(), 11);
        assert_eq!(decode_mqtt_records(&bytes[..6]), Err(FrameError::Truncated));
    }

    proptest::proptest! {
        #[test]
        fn mqtt_frames_round_trip(
            pairs in proptest::collection::vec(("[a-z0-9é-]{0,24}", proptest::num::u16::ANY), 0..20),
            records in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
            released: bool,
            cut in 0usize..4096,
        ) {
            let bytes = encode_mqtt_records(&pairs, &records);
            proptest::prop_assert_eq!(bytes.len(), mqtt_prefix_len(&pairs) + records.len());
            let (back, rest) = decode_mqtt_records(&bytes).expect("decodes");
            proptest::prop_assert_eq!(&back, &pairs);
            proptest::prop_assert_eq!(rest, &records[..]);
            let state = if released { Qos2State::Released } else { Qos2State::Received };
            let ids = encode_mqtt_ids(state, &pairs);
            proptest::prop_assert_eq!(decode_mqtt_ids(&ids).expect("decodes"), (state, pairs.clone()));
            // A cut list is refused (never fewer pairs), as are trailing bytes.
            proptest::prop_assert!(decode_mqtt_ids(&ids[..cut % ids.len()]).is_err());
            let mut longer = ids.clone();
            longer.push(0);
            proptest::prop_assert_eq!(decode_mqtt_ids(&longer), Err(FrameError::Trailing));
        }

        #[test]
        fn arrow_frames_round_trip(
            key: u64,
            offset: i64,
            rows: u32,
            messages in proptest::collection::vec(
                (proptest::collection::vec(proptest::num::u8::ANY, 0..64),
                 proptest::collection::vec(proptest::num::u8::ANY, 0..256)),
                0..6,
            ),
            cut in 0usize..4096,
        ) {
            let borrowed: Vec<IpcMessage<'_>> =
                messages.iter().map(|(h, b)| (h.as_slice(), b.as_slice())).collect();
            let bytes = encode_arrow(key, offset, rows, borrowed.iter().copied());
            let frame = decode_arrow(&bytes).expect("decodes");
            proptest::prop_assert_eq!(
                &frame,
                &ArrowFrame { stream_key: key, offset, rows, messages: borrowed.clone() }
            );
            // Any shorter payload is refused (never a frame with fewer messages).
            let cut = cut % bytes.len();
            proptest::prop_assert!(decode_arrow(&bytes[..cut]).is_err());
            let mut longer = bytes.clone();
            longer.push(0);
            proptest::prop_assert_eq!(decode_arrow(&longer), Err(FrameError::Trailing));
        }
    }
}
