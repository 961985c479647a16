//! Arrow IPC messages of one Flight stream, decoded: the schema message, dictionary batches
//! (kept per dictionary id, raw too, so every WAL frame can carry the dictionaries its batch
//! needs) and record batches (body buffers shared with the request, not copied, unless a
//! buffer is compressed or misaligned). The same decoder replays arrow-batch WAL frames.
//!
//! Every buffer a message names is checked to lie inside its body, and every compressed
//! buffer's announced size against a bound, before arrow-ipc reads it (it slices without
//! checking, and allocates what the prefix announces).
//!
//! This file depends on nothing else in the crate (its errors are its own [`IpcError`]),
//! so the `flight_ipc` fuzz target compiles it as is.

use std::collections::{BTreeMap, HashMap};

use arrow_array::{ArrayRef, RecordBatch};
use arrow_buffer::Buffer;
use arrow_ipc::{root_as_message, MessageHeader};
use arrow_schema::{Schema, SchemaRef};
use bytes::Bytes;

/// Most bytes one compressed buffer may announce as its uncompressed size.
pub const MAX_DECOMPRESSED_BUFFER: u64 = 256 << 20;
/// Most bytes all compressed buffers of one message may announce together.
pub const MAX_DECOMPRESSED_MESSAGE: u64 = 512 << 20;

/// An IPC message that does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IpcError {
    /// The header is not an Arrow IPC `Message` flatbuffer.
    #[error("not an Arrow IPC message: {0}")]
    NotAMessage(String),
    /// A message of a kind this place does not take.
    #[error("unexpected Arrow IPC {found} message; expected {expected}")]
    Unexpected {
        /// What was expected.
        expected: &'static str,
        /// What came.
        found: String,
    },
    /// The message's content does not decode.
    #[error("Arrow IPC {what} does not decode: {reason}")]
    Corrupt {
        /// Schema, dictionary batch or record batch.
        what: &'static str,
        /// Why.
        reason: String,
    },
}

/// Result of decoding.
pub type Result<T, E = IpcError> = std::result::Result<T, E>;

/// One IPC message as it came: its flatbuffer header and its body.
#[derive(Debug, Clone)]
pub struct RawMessage {
    /// The flatbuffer `Message`.
    pub header: Bytes,
    /// The body (buffers).
    pub body: Bytes,
}

/// What a message was.
#[derive(Debug)]
pub enum Decoded {
    /// A dictionary batch, now applied.
    Dictionary,
    /// A record batch.
    Batch(RecordBatch),
}

/// Decodes the schema of an IPC schema message.
pub fn schema_of(header: &[u8]) -> Result<Schema> {
    let message = root_as_message(header).map_err(|e| IpcError::NotAMessage(e.to_string()))?;
    let Some(schema) = message.header_as_schema() else {
        return Err(IpcError::Unexpected {
            expected: "schema",
            found: header_name(message.header_type()),
        });
    };
    let Some(fields) = schema.fields() else {
        return Err(corrupt("schema", "no fields"));
    };
    for field in fields {
        check_field(field, 0)?;
    }
    catch("schema", || Ok(arrow_ipc::convert::fb_to_schema(schema)))
}

/// Deepest field nesting a schema may have.
const MAX_FIELD_DEPTH: usize = 64;

/// A schema field arrow-ipc can convert: it has a type, at every depth (arrow-ipc panics on
/// a field of type NONE; the `flight_ipc` fuzz target found it).
fn check_field(field: arrow_ipc::Field<'_>, depth: usize) -> Result<()> {
    if depth > MAX_FIELD_DEPTH {
        return Err(corrupt("schema", "fields nested too deep"));
    }
    if field.type_type() == arrow_ipc::Type::NONE {
        return Err(corrupt(
            "schema",
            format!("field `{}` has no type", field.name().unwrap_or_default()),
        ));
    }
    for child in field.children().into_iter().flatten() {
        check_field(child, depth + 1)?;
    }
    Ok(())
}

/// The decoding state of one stream: its schema and its dictionaries.
pub struct StreamDecoder {
    schema: SchemaRef,
    dictionaries: HashMap<i64, ArrayRef>,
    /// The raw dictionary messages in force, per id (a replacement, then its deltas).
    raw_dictionaries: BTreeMap<i64, Vec<RawMessage>>,
}

impl StreamDecoder {
    /// A decoder for batches of `schema`.
    pub fn new(schema: SchemaRef) -> StreamDecoder {
        StreamDecoder {
            schema,
            dictionaries: HashMap::new(),
            raw_dictionaries: BTreeMap::new(),
        }
    }

    /// The stream's schema.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The dictionary messages in force, to log beside a record batch.
    pub fn dictionary_messages(&self) -> impl Iterator<Item = &RawMessage> {
        self.raw_dictionaries.values().flatten()
    }

    /// Decodes one message: applies a dictionary batch, or returns a record batch.
    pub fn decode(&mut self, message: &RawMessage) -> Result<Decoded> {
        let header =
            root_as_message(&message.header).map_err(|e| IpcError::NotAMessage(e.to_string()))?;
        let version = header.version();
        let body = Buffer::from(message.body.clone());
        match header.header_type() {
            MessageHeader::DictionaryBatch => {
                let Some(dictionary) = header.header_as_dictionary_batch() else {
                    return Err(corrupt("dictionary batch", "no header"));
                };
                let Some(data) = dictionary.data() else {
                    return Err(corrupt("dictionary batch", "no data"));
                };
                check_buffers(&data, &body, "dictionary batch")?;
                let (id, delta) = (dictionary.id(), dictionary.isDelta());
                let schema = self.schema.clone();
                let dictionaries = &mut self.dictionaries;
                catch("dictionary batch", || {
                    arrow_ipc::reader::read_dictionary(
                        &body,
                        dictionary,
                        &schema,
                        dictionaries,
                        &version,
                    )
                })?;
                let raw = self.raw_dictionaries.entry(id).or_default();
                if !delta {
                    raw.clear();
                }
                raw.push(message.clone());
                Ok(Decoded::Dictionary)
            }
            MessageHeader::RecordBatch => {
                let Some(batch) = header.header_as_record_batch() else {
                    return Err(corrupt("record batch", "no header"));
                };
                check_buffers(&batch, &body, "record batch")?;
                let schema = self.schema.clone();
                let dictionaries = &self.dictionaries;
                let batch = catch("record batch", || {
                    arrow_ipc::reader::read_record_batch(
                        &body,
                        batch,
                        schema,
                        dictionaries,
                        None,
                        &version,
                    )
                })?;
                Ok(Decoded::Batch(batch))
            }
            other => Err(IpcError::Unexpected {
                expected: "dictionary or record batch",
                found: header_name(other),
            }),
        }
    }
}

/// Every buffer of `batch` inside `body`; compressed buffers announce a bounded size.
fn check_buffers(
    batch: &arrow_ipc::RecordBatch<'_>,
    body: &Buffer,
    what: &'static str,
) -> Result<()> {
    if batch.length() < 0 {
        return Err(corrupt(what, "negative length"));
    }
    let compressed = batch.compression().is_some();
    let mut announced = 0u64;
    for buffer in batch.buffers().iter().flatten() {
        let (offset, length) = (buffer.offset(), buffer.length());
        let end = u64::try_from(offset)
            .ok()
            .zip(u64::try_from(length).ok())
            .and_then(|(o, l)| o.checked_add(l));
        match end {
            Some(end) if end <= body.len() as u64 => {}
            _ => {
                return Err(corrupt(
                    what,
                    format!(
                        "buffer at {offset} of {length} bytes lies outside the {}-byte body",
                        body.len()
                    ),
                ))
            }
        }
        if compressed && length > 0 {
            if length < 8 {
                return Err(corrupt(what, "compressed buffer without its length prefix"));
            }
            let start = offset as usize;
            let mut prefix = [0u8; 8];
            prefix.copy_from_slice(&body.as_slice()[start..start + 8]);
            let size = i64::from_le_bytes(prefix);
            if size > 0 {
                let size = size as u64;
                announced = announced.saturating_add(size);
                if size > MAX_DECOMPRESSED_BUFFER || announced > MAX_DECOMPRESSED_MESSAGE {
                    return Err(corrupt(
                        what,
                        format!("a compressed buffer announces {size} bytes, beyond the bound"),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Runs an arrow-ipc decode, turning its errors (and its panics on malformed input)
/// into [`IpcError::Corrupt`].
fn catch<T>(
    what: &'static str,
    f: impl FnOnce() -> std::result::Result<T, arrow_schema::ArrowError>,
) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(corrupt(what, e.to_string())),
        Err(_) => Err(corrupt(what, "malformed message")),
    }
}

fn corrupt(what: &'static str, reason: impl Into<String>) -> IpcError {
    IpcError::Corrupt {
        what,
        reason: reason.into(),
    }
}

fn header_name(header: MessageHeader) -> String {
    header
        .variant_name()
        .map_or_else(|| format!("{header:?}"), str::to_string)
}

/// Decodes one arrow-batch WAL frame's messages under `schema` (dictionaries first, the
/// record batch last) into its record batch.
pub fn decode_frame<'a>(
    schema: SchemaRef,
    messages: impl Iterator<Item = (&'a [u8], &'a [u8])>,
) -> Result<RecordBatch> {
    let mut decoder = StreamDecoder::new(schema);
    let mut last = None;
    for (header, body) in messages {
        let raw = RawMessage {
            header: Bytes::copy_from_slice(header),
            body: Bytes::copy_from_slice(body),
        };
        last = Some(decoder.decode(&raw)?);
    }
    match last {
        Some(Decoded::Batch(batch)) => Ok(batch),
        _ => Err(corrupt("frame", "no record batch last")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `flight_ipc` fuzz target's first find: a schema message whose field has type
    /// NONE made arrow-ipc panic; it is refused as a corrupt schema now.
    #[test]
    fn a_schema_field_without_a_type_is_refused() {
        let crash: [u8; 55] = [
            20, 8, 0, 0, 0, 41, 0, 46, 0, 2, 0, 0, 0, 41, 0, 8, 0, 8, 0, 0, 0, 4, 0, 8, 0, 8, 0, 0,
            0, 24, 0, 0, 0, 8, 0, 0, 0, 41, 0, 16, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 251, 255, 255,
            255,
        ];
        let found = schema_of(&crash[1..]);
        assert!(
            matches!(found, Err(IpcError::Corrupt { what: "schema", .. })),
            "{found:?}"
        );
    }
}
