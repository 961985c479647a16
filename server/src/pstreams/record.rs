//! A persistent stream's durable record and the store that keeps the records: the
//! registry a resume, a retire and replay consult. Single node: [`super::file_store`];
//! a cluster: [`super::etcd_store`]. Every write is a compare-and-swap on the record's
//! revision, so two pods moving one stream at once cannot both win.

use serde::{Deserialize, Serialize};

use crate::error::{Result, ServerError};
use crate::journal::frames::RecordFormat;

/// How a persistent stream's records are encoded (fixed at creation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamRecordType {
    /// Protobuf, per the stream's descriptor.
    Proto,
    /// JSON objects.
    Json,
    /// Raw Avro datums, per the stream's writer schema (kept as its descriptor).
    Avro,
}

impl TryFrom<RecordFormat> for StreamRecordType {
    type Error = ServerError;

    /// Arrow batches come only through Arrow Flight, whose streams are never persistent.
    fn try_from(format: RecordFormat) -> Result<Self, ServerError> {
        match format {
            RecordFormat::Proto => Ok(StreamRecordType::Proto),
            RecordFormat::Json => Ok(StreamRecordType::Json),
            RecordFormat::Avro => Ok(StreamRecordType::Avro),
            RecordFormat::Arrow => Err(ServerError::InvalidArgument(
                "persistent streams take PROTO, JSON or AVRO records, not Arrow batches".into(),
            )),
        }
    }
}

impl From<StreamRecordType> for RecordFormat {
    fn from(t: StreamRecordType) -> Self {
        match t {
            StreamRecordType::Proto => RecordFormat::Proto,
            StreamRecordType::Json => RecordFormat::Json,
            StreamRecordType::Avro => RecordFormat::Avro,
        }
    }
}

/// One persistent stream, as the registry keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistentStreamRecord {
    /// The durable stream id (a UUID), also the appId of its Delta `txn`.
    pub id: String,
    /// Full table name (lower case).
    pub table: String,
    /// Record encoding.
    pub record_type: StreamRecordType,
    /// The encoded DescriptorProto of a PROTO stream (base64 in the file; empty for JSON;
    /// the writer schema's JSON for AVRO): a resume's descriptor must compile to the same
    /// plan against the table (an AVRO resume carries none: this one is compiled again).
    #[serde(with = "base64_bytes")]
    pub descriptor: Vec<u8>,
    /// The pod that holds the stream (its WAL may have the stream's uncommitted records);
    /// empty: released, every record of it is in Delta and any pod may take it.
    pub owner: String,
    /// Retired streams never resume.
    pub retired: bool,
    /// When the stream was created (RFC 3339).
    pub created_at: String,
}

/// A record and the store's revision of it (changes with every write of the record).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredStream {
    /// The record.
    pub record: PersistentStreamRecord,
    /// Its revision (> 0), the guard of the next write.
    pub revision: i64,
}

/// Where persistent stream records live.
#[tonic::async_trait]
pub trait PersistentStreamStore: Send + Sync {
    /// The record of stream `id`, if any, with its revision.
    async fn get(&self, id: &str) -> Result<Option<StoredStream>>;
    /// Stores `record` durably if the stored revision of its id is still `expected` (0: only
    /// if there is none); `false` (nothing written) when it changed first.
    async fn replace(&self, expected: i64, record: PersistentStreamRecord) -> Result<bool>;
    /// Every record.
    async fn list(&self) -> Result<Vec<StoredStream>>;
}

/// Serde of bytes as standard base64 text.
mod base64_bytes {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}
