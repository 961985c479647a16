//! Stream set-up: validates a `CreateIngestStreamRequest` against the caller,
//! the catalog and the table schema, and logs the stream-open frame. The
//! pieces (table name, record type, descriptor, open frame) are shared with
//! the set-up of persistent streams (`persistent_open`).

use std::sync::Arc;

use sluice_proto::{CreateIngestStreamRequest, RecordType};

use super::request::RequestParser;
use crate::auth::Caller;
use crate::error::{Result, ServerError};
use crate::journal::frames::{RecordFormat, StreamOpen, KIND_STREAM_OPEN};
use crate::journal::streams::LoggedMark;
use crate::journal::RecordPlan;
use crate::pod::Pod;
use crate::sink::SharedSink;

/// An opened stream, ready for records.
pub struct OpenedStream {
    /// Key of the stream in the WAL.
    pub key: u64,
    /// Id returned to the client.
    pub stream_id: String,
    /// The table's sink.
    pub sink: SharedSink,
    /// Checks the stream's requests and parses them into the table's rows.
    pub parser: RequestParser,
    /// The persistent stream this connection writes (None: ephemeral).
    pub persistent: Option<Arc<str>>,
    /// The table schema the parser's builder was made for (the table's at
    /// the open, or after an auto-evolve of this stream).
    pub built_for: Arc<sluice_zeroparser::TableSchema>,
    /// The stream's logged-LSN mark in the pod's stream registry.
    pub logged: LoggedMark,
}

/// Validates the request and logs the stream-open frame.
pub async fn open_stream(
    pod: &Pod,
    caller: &Caller,
    header_table: Option<&str>,
    create: CreateIngestStreamRequest,
) -> Result<OpenedStream> {
    let checked = check_create(pod, caller, header_table, create).await?;
    log_open(pod, checked, None).await
}

/// A create request checked against the caller, the catalog and the table.
pub struct CheckedCreate {
    /// Full table name (lower case).
    pub table: String,
    /// The table's sink.
    pub sink: SharedSink,
    /// Record encoding.
    pub format: RecordFormat,
    /// The compiled descriptor or writer schema.
    pub plan: RecordPlan,
    /// The encoded descriptor (empty for JSON; the writer schema's JSON for AVRO).
    pub descriptor: Vec<u8>,
}

/// Checks a create request: table name (and the table header), MODIFY on the
/// table, the table exists, the record type, the descriptor fits the table.
pub async fn check_create(
    pod: &Pod,
    caller: &Caller,
    header_table: Option<&str>,
    create: CreateIngestStreamRequest,
) -> Result<CheckedCreate> {
    let table = create
        .table_name
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ServerError::InvalidArgument("create_stream: table_name is missing".into()))?
        .to_ascii_lowercase();
    check_header(header_table, &table, "create_stream")?;
    pod.auth.authorize_write(caller, &table)?;
    let sink = table_sink(pod, &table).await?;
    let format = record_format(create.record_type, "create_stream")?;
    let (plan, descriptor) = match format {
        RecordFormat::Proto => {
            let descriptor = create.descriptor_proto.unwrap_or_default().to_vec();
            if descriptor.is_empty() {
                return Err(ServerError::InvalidArgument(
                    "create_stream: descriptor_proto is required for PROTO streams".into(),
                ));
            }
            let plan = compile(format, &descriptor, &sink, "create_stream")?;
            (plan, descriptor)
        }
        RecordFormat::Avro => {
            let schema = create.avro_schema_json.unwrap_or_default().into_bytes();
            if schema.iter().all(u8::is_ascii_whitespace) {
                return Err(ServerError::InvalidArgument(
                    "create_stream: avro_schema_json is required for AVRO streams".into(),
                ));
            }
            let plan = compile(format, &schema, &sink, "create_stream")?;
            (plan, schema)
        }
        RecordFormat::Json => (RecordPlan::Json, Vec::new()),
        RecordFormat::Arrow => return Err(arrow_only_by_flight("create_stream")),
    };
    Ok(CheckedCreate {
        table,
        sink,
        format,
        plan,
        descriptor,
    })
}

/// INVALID_ARGUMENT when the table header names another table than `table`.
pub fn check_header(header_table: Option<&str>, table: &str, what: &str) -> Result<()> {
    match header_table {
        Some(header) if header != table => Err(ServerError::InvalidArgument(format!(
            "{what}: table `{table}` differs from the {} header `{header}`",
            crate::auth::TABLE_HEADER
        ))),
        _ => Ok(()),
    }
}

/// The sink of `table`; NOT_FOUND when the table does not exist.
pub async fn table_sink(pod: &Pod, table: &str) -> Result<SharedSink> {
    pod.sink_for(table)
        .await?
        .ok_or_else(|| ServerError::NotFound(format!("table `{table}` does not exist")))
}

/// The record format a request's `record_type` names (absent: PROTO).
pub fn record_format(record_type: Option<i32>, what: &str) -> Result<RecordFormat> {
    let Some(v) = record_type else {
        return Ok(RecordFormat::Proto);
    };
    match RecordType::try_from(v) {
        Ok(RecordType::Proto) => Ok(RecordFormat::Proto),
        Ok(RecordType::Json) => Ok(RecordFormat::Json),
        Ok(RecordType::Avro) => Ok(RecordFormat::Avro),
        Ok(RecordType::Unspecified) => Err(ServerError::InvalidArgument(format!(
            "{what}: record_type is RECORD_TYPE_UNSPECIFIED; set PROTO, JSON or AVRO"
        ))),
        Err(_) => Err(ServerError::InvalidArgument(format!(
            "{what}: unknown record_type {v}"
        ))),
    }
}

/// Arrow batches come through Arrow Flight `DoPut`, never in a Zerobus stream.
pub fn arrow_only_by_flight(what: &str) -> ServerError {
    ServerError::InvalidArgument(format!(
        "{what}: Arrow record batches are sent through Arrow Flight DoPut"
    ))
}

/// Compiles the descriptor (or Avro writer schema) of a `format` stream against the
/// table of `sink`.
pub fn compile(
    format: RecordFormat,
    descriptor: &[u8],
    sink: &SharedSink,
    what: &str,
) -> Result<RecordPlan> {
    RecordPlan::compile(
        format,
        descriptor,
        &sink.schema(),
        sink.keeps_rescued_data(),
    )
    .map_err(|e| {
        let kind = match format {
            RecordFormat::Avro => "Avro schema",
            _ => "descriptor",
        };
        ServerError::InvalidArgument(format!(
            "{what}: {kind} does not fit table `{}`: {e}",
            sink.name()
        ))
    })
}

/// A stream whose open frame is logged and registered.
pub struct OpenFrame {
    /// The stream's key in the WAL.
    pub key: u64,
    /// The stream's logged-LSN mark in the pod's stream registry.
    pub logged: LoggedMark,
}

/// Logs a new stream's open frame into the WAL for the table of `sink` and registers
/// the stream (so the frame outlives a purge while needed).
pub async fn log_open_frame(
    pod: &Pod,
    sink: &SharedSink,
    format: RecordFormat,
    descriptor: Vec<u8>,
    persistent: Option<&str>,
) -> Result<OpenFrame> {
    let key = rand::random::<u64>();
    let open = StreamOpen {
        stream_key: key,
        table: sink.name().to_string(),
        format,
        descriptor,
        persistent_id: persistent.map(str::to_string),
        columns: Some(sink.schema().to_sql()),
    };
    let payload = Arc::new(open.encode());
    let lsn = sink
        .append(KIND_STREAM_OPEN, payload.as_ref().clone(), None)
        .await?;
    let logged = pod.streams.register(key, sink.name(), payload, lsn, true);
    Ok(OpenFrame { key, logged })
}

/// Logs the stream-open frame of a checked stream (of persistent stream
/// `persistent`, if any) and returns the opened stream.
pub async fn log_open(
    pod: &Pod,
    checked: CheckedCreate,
    persistent: Option<Arc<str>>,
) -> Result<OpenedStream> {
    let CheckedCreate {
        table: _,
        sink,
        format,
        plan,
        descriptor,
    } = checked;
    let built_for = sink.schema();
    let builder = sink.batch_builder_for(&built_for)?;
    let OpenFrame { key, logged } =
        log_open_frame(pod, &sink, format, descriptor, persistent.as_deref()).await?;
    Ok(OpenedStream {
        key,
        stream_id: match &persistent {
            Some(id) => id.to_string(),
            None => crate::sink::system_columns::stream_id(key),
        },
        sink,
        parser: RequestParser::new(format, plan, builder, pod.config.limits.max_record_bytes),
        persistent,
        built_for,
        logged,
    })
}
