//! Set-up of a persistent stream's connection: a create registers a new durable
//! stream (offsets from 0); a resume checks the stream (exists, the caller may
//! write its table, not retired, same record type, a descriptor compiling to
//! the same plan), makes this pod its owner (`handover::take_over`: a release
//! by the owner pod, or fenced), takes the stream's hold from any older
//! connection, and answers the watermark — max(the Delta log's `txn` for the
//! stream, the highest offset durable in this pod's WAL, what a releasing owner
//! answered) — after which the stream expects watermark + 1.

use std::sync::Arc;

use sluice_proto::{
    resume_ingest_stream_request, CreatePersistentStreamRequest, ResumeIngestStreamRequest,
};

use super::handover::take_over;
use super::open::{
    check_create, check_header, compile, log_open, record_format, table_sink, CheckedCreate,
    OpenedStream,
};
use crate::auth::Caller;
use crate::error::{Result, ServerError};
use crate::journal::frames::RecordFormat;
use crate::journal::RecordPlan;
use crate::pod::Pod;
use crate::pstreams::{Attached, PersistentStreamRecord};

/// A persistent stream's connection, ready for records.
pub struct PersistentOpened {
    /// The opened stream (its `persistent` is the stream id).
    pub opened: OpenedStream,
    /// The connection's hold on the stream.
    pub attached: Attached,
    /// Resume only: the stream's watermark (None: nothing of it is durable).
    pub watermark: Option<i64>,
}

/// Creates a persistent stream and opens its first connection.
pub async fn create_persistent(
    pod: &Pod,
    caller: &Caller,
    header_table: Option<&str>,
    create: CreatePersistentStreamRequest,
) -> Result<PersistentOpened> {
    let inner = create.create_stream.ok_or_else(|| {
        ServerError::InvalidArgument(
            "create_stream: CreatePersistentStreamRequest carries no create_stream".into(),
        )
    })?;
    let checked = check_create(pod, caller, header_table, inner).await?;
    let record = pod
        .pstreams
        .create(&checked.table, checked.format, checked.descriptor.clone())
        .await?;
    let attached = pod.pstreams.attach(&record.id).await?;
    let opened = log_open(pod, checked, Some(Arc::from(record.id.as_str()))).await?;
    tracing::info!(stream_id = %record.id, table = %record.table, "persistent stream created");
    Ok(PersistentOpened {
        opened,
        attached,
        watermark: None,
    })
}

/// Resumes a persistent stream on a new connection.
pub async fn resume_persistent(
    pod: &Pod,
    caller: &Caller,
    header_table: Option<&str>,
    resume: ResumeIngestStreamRequest,
) -> Result<PersistentOpened> {
    let id = match resume.identifier {
        Some(resume_ingest_stream_request::Identifier::StreamId(id)) if !id.trim().is_empty() => {
            id.trim().to_string()
        }
        _ => {
            return Err(ServerError::InvalidArgument(
                "resume_stream: stream_id is missing".into(),
            ))
        }
    };
    let record = resumable(pod, caller, header_table, &id).await?;
    let format = match resume.record_type {
        None => record.record_type.into(),
        given => record_format(given, "resume_stream")?,
    };
    if format != RecordFormat::from(record.record_type) {
        return Err(ServerError::InvalidArgument(format!(
            "resume_stream: persistent stream `{id}` was created with record type {:?}, \
             not {format:?}",
            RecordFormat::from(record.record_type)
        )));
    }
    let sink = table_sink(pod, &record.table).await?;
    let plan = match format {
        RecordFormat::Json => RecordPlan::Json,
        RecordFormat::Proto => resumed_plan(&record, resume.descriptor_proto, &sink)?,
        // The resume carries no writer schema: the stream's own is compiled again.
        RecordFormat::Avro => compile(format, &record.descriptor, &sink, "resume_stream")?,
        RecordFormat::Arrow => return Err(super::open::arrow_only_by_flight("resume_stream")),
    };
    let released = take_over(pod, &id).await?;
    let attached = pod.pstreams.attach(&id).await?;
    // Retired (or moved) while this resume waited for the older connection to end.
    let record = resumable(pod, caller, header_table, &id).await?;
    if record.owner != pod.pod_id() {
        return Err(ServerError::Unavailable(format!(
            "resume_stream: persistent stream `{id}` moved to pod `{}` meanwhile; retry",
            record.owner
        )));
    }
    let delta = sink.stream_txn(&id).await?;
    let wal = match pod.pstreams.wal_mark(&id) {
        Some((offset, lsn)) => {
            pod.wal.wait_durable(lsn).await?;
            Some(offset)
        }
        None => None,
    };
    let watermark = delta.max(wal).max(released);
    let checked = CheckedCreate {
        table: record.table.clone(),
        sink,
        format,
        plan,
        descriptor: record.descriptor.clone(),
    };
    let mut opened = log_open(pod, checked, Some(Arc::from(id.as_str()))).await?;
    if let Some(w) = watermark {
        opened.parser.resume_after(w);
    }
    tracing::info!(stream_id = %id, ?watermark, ?delta, ?wal, ?released, "persistent stream resumed");
    Ok(PersistentOpened {
        opened,
        attached,
        watermark,
    })
}

/// The record of stream `id` if the caller may resume it: it exists (NOT_FOUND), the
/// table header names its table (INVALID_ARGUMENT), the caller may write its table
/// (PERMISSION_DENIED) and it is not retired (FAILED_PRECONDITION).
pub async fn resumable(
    pod: &Pod,
    caller: &Caller,
    header_table: Option<&str>,
    id: &str,
) -> Result<PersistentStreamRecord> {
    let record = accessible(pod, caller, header_table, id, "resume_stream").await?;
    if record.retired {
        return Err(ServerError::FailedPrecondition(format!(
            "resume_stream: persistent stream `{id}` was retired; a retired stream never \
             resumes, create a new one"
        )));
    }
    Ok(record)
}

/// The record of stream `id` if it exists, belongs to the header's table and the caller
/// may write that table (whichever pod owns it).
pub async fn accessible(
    pod: &Pod,
    caller: &Caller,
    header_table: Option<&str>,
    id: &str,
    what: &str,
) -> Result<PersistentStreamRecord> {
    let record = pod.pstreams.get(id).await?.record;
    check_header(header_table, &record.table, what)?;
    pod.auth.authorize_write(caller, &record.table)?;
    Ok(record)
}

/// The plan of a resumed PROTO stream: the resume's descriptor if it sends one (it must
/// compile to the same plan as the stream's own), else the stream's own.
fn resumed_plan(
    record: &PersistentStreamRecord,
    descriptor: Option<impl AsRef<[u8]>>,
    sink: &crate::sink::SharedSink,
) -> Result<RecordPlan> {
    let own = compile(
        RecordFormat::Proto,
        &record.descriptor,
        sink,
        "resume_stream",
    )?;
    let Some(given) = descriptor.filter(|d| !d.as_ref().is_empty()) else {
        return Ok(own);
    };
    let given = given.as_ref();
    if given == record.descriptor.as_slice() {
        return Ok(own);
    }
    let plan = compile(RecordFormat::Proto, given, sink, "resume_stream")?;
    let same = match (&plan, &own) {
        (RecordPlan::Proto(a), RecordPlan::Proto(b)) => a == b,
        _ => false,
    };
    if !same {
        return Err(ServerError::InvalidArgument(format!(
            "resume_stream: the descriptor does not compile to the plan persistent stream \
             `{}` was created with; resume with the stream's descriptor",
            record.id
        )));
    }
    Ok(plan)
}
