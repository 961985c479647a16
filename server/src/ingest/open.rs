//! Stream set-up: validates a `CreateIngestStreamRequest` against the caller,
//! the catalog and the table schema, and logs the stream-open frame.

use std::sync::Arc;

use sluice_proto::{CreateIngestStreamRequest, RecordType};
use sluice_zeroparser::ProtoPlan;

use super::request::RequestParser;
use crate::auth::Caller;
use crate::error::{Result, ServerError};
use crate::journal::frames::{RecordFormat, StreamOpen, KIND_STREAM_OPEN};
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
}

/// Validates the request and logs the stream-open frame.
pub async fn open_stream(
    pod: &Pod,
    caller: &Caller,
    header_table: Option<&str>,
    create: CreateIngestStreamRequest,
) -> Result<OpenedStream> {
    let table = create
        .table_name
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ServerError::InvalidArgument("create_stream: table_name is missing".into()))?
        .to_ascii_lowercase();
    if let Some(header) = header_table {
        if header != table {
            return Err(ServerError::InvalidArgument(format!(
                "create_stream: table_name `{table}` differs from the {} header `{header}`",
                crate::auth::TABLE_HEADER
            )));
        }
    }
    pod.auth.authorize_write(caller, &table)?;
    let sink = pod
        .sink_for(&table)
        .await?
        .ok_or_else(|| ServerError::NotFound(format!("table `{table}` does not exist")))?;
    let format = match create.record_type {
        None => RecordFormat::Proto,
        Some(v) => match RecordType::try_from(v) {
            Ok(RecordType::Proto) => RecordFormat::Proto,
            Ok(RecordType::Json) => RecordFormat::Json,
            Ok(RecordType::Avro) => return Err(ServerError::Unimplemented(
                "create_stream: AVRO records are not supported by Sluice yet; use PROTO or JSON"
                    .into(),
            )),
            Ok(RecordType::Unspecified) => {
                return Err(ServerError::InvalidArgument(
                    "create_stream: record_type is RECORD_TYPE_UNSPECIFIED; set PROTO or JSON"
                        .into(),
                ))
            }
            Err(_) => {
                return Err(ServerError::InvalidArgument(format!(
                    "create_stream: unknown record_type {v}"
                )))
            }
        },
    };
    let (plan, descriptor) = match format {
        RecordFormat::Proto => {
            let descriptor = create.descriptor_proto.unwrap_or_default();
            if descriptor.is_empty() {
                return Err(ServerError::InvalidArgument(
                    "create_stream: descriptor_proto is required for PROTO streams".into(),
                ));
            }
            let plan = ProtoPlan::compile(&descriptor, sink.schema()).map_err(|e| {
                ServerError::InvalidArgument(format!(
                    "create_stream: descriptor does not fit table `{table}`: {e}"
                ))
            })?;
            (Some(plan), descriptor.to_vec())
        }
        RecordFormat::Json => (None, Vec::new()),
    };
    let builder = sink.batch_builder()?;
    let key = rand::random::<u64>();
    let open = StreamOpen {
        stream_key: key,
        table: table.clone(),
        format,
        descriptor,
    };
    let payload = Arc::new(open.encode());
    let lsn = sink
        .append(KIND_STREAM_OPEN, payload.as_ref().clone(), None)
        .await?;
    pod.streams.register(key, &table, payload, lsn, true);
    Ok(OpenedStream {
        key,
        stream_id: crate::sink::system_columns::stream_id(key),
        sink,
        parser: RequestParser::new(format, plan, builder, pod.config.limits.max_record_bytes),
    })
}
