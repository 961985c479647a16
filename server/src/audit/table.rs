//! The audit table (`--audit-table`): created on first use with a fixed schema, and
//! appended to like a table a producer writes — each append is a one-shot internal JSON
//! stream of the pod (stream-open frame, one records frame), so the rows are in the WAL,
//! durable before the change is answered, committed by the table's sink and replayed after
//! a crash.

use sluice_proto::ephemeral_stream_request::Payload;
use sluice_proto::ingest_record_request::Record;
use sluice_proto::{EphemeralStreamRequest, IngestRecordRequest};

use super::event::AuditEvent;
use crate::auth::Caller;
use crate::error::{Result, ServerError};
use crate::ingest::open::{log_open, table_sink, CheckedCreate};
use crate::journal::frames::{encode_records, RecordFormat, KIND_RECORDS};
use crate::pod::Pod;
use crate::sink::SharedSink;
use crate::tables::policy::parse_columns;
use crate::tables::{self, NewTable};

/// The audit table's columns.
pub const AUDIT_COLUMNS: &str = "event_time TIMESTAMP NOT NULL, who STRING NOT NULL, \
     action STRING NOT NULL, target STRING NOT NULL, pod STRING NOT NULL, detail STRING";

/// Appends `events` to the audit table (nothing without `--audit-table`) and returns once
/// they are durable in the WAL.
pub async fn append(pod: &Pod, events: &[AuditEvent]) -> Result<()> {
    let Some(table) = pod.config.audit_table.as_deref() else {
        return Ok(());
    };
    if events.is_empty() {
        return Ok(());
    }
    let sink = audit_sink(pod, table).await?;
    let checked = CheckedCreate {
        table: sink.name().to_string(),
        sink,
        format: RecordFormat::Json,
        plan: crate::journal::RecordPlan::Json,
        descriptor: Vec::new(),
    };
    let mut stream = log_open(pod, checked, None).await?;
    let appended = async {
        let mut records = Vec::with_capacity(events.len());
        for (offset, event) in (0i64..).zip(events) {
            let request = EphemeralStreamRequest {
                payload: Some(Payload::IngestRecord(IngestRecordRequest {
                    offset_id: Some(offset),
                    record: Some(Record::JsonRecord(event.to_json())),
                })),
            };
            stream.parser.parse(request, &mut records)?;
        }
        let batch = stream.parser.finish();
        let batch = stream.sink.with_system_columns(
            batch,
            stream.key,
            records.iter().map(|(offset, _)| *offset),
        )?;
        let payload = encode_records(stream.key, records.iter().map(|(o, r)| (*o, r.as_ref())));
        let lsn = stream
            .sink
            .append(KIND_RECORDS, payload, Some(batch))
            .await?;
        pod.streams.records_logged(stream.key, lsn);
        pod.wal.wait_durable(lsn).await?;
        Ok(())
    }
    .await;
    pod.streams.closed(stream.key);
    appended
}

/// The audit table's sink; creates the table if it does not exist. A table of that name
/// with other columns is refused.
async fn audit_sink(pod: &Pod, table: &str) -> Result<SharedSink> {
    let sink = match pod.sink_for(table).await? {
        Some(sink) => sink,
        None => {
            let new = NewTable {
                name: table.to_string(),
                columns: AUDIT_COLUMNS.to_string(),
                ..NewTable::default()
            };
            // The pod itself creates it (not a caller): no audit event of its own.
            match tables::create_table(pod, &Caller::Anonymous, new).await {
                Ok(entry) => {
                    tracing::info!(table = %entry.full_name, "created the audit table")
                }
                Err(ServerError::AlreadyExists(_)) => {}
                Err(e) => return Err(e),
            }
            table_sink(pod, table).await?
        }
    };
    if *sink.schema() != parse_columns(AUDIT_COLUMNS)? {
        return Err(ServerError::FailedPrecondition(format!(
            "--audit-table {table} exists with other columns than the audit table's ({AUDIT_COLUMNS})"
        )));
    }
    Ok(sink)
}
