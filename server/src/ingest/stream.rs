//! One producer stream: read requests, parse and validate them, log them,
//! append them to the table's memtable, and send cumulative durability acks.
//!
//! Requests that are already waiting in the HTTP/2 buffer are taken as one
//! run: parsed into the stream's reusable builder, logged as one WAL frame
//! and appended as one Arrow batch. If a request in the run is bad, the valid
//! requests before it are still logged and acked, then the stream ends with
//! the bad request's status. Back-pressure: the stream is not read while the
//! WAL's queue is full (`reserve` waits), so HTTP/2 flow control pushes back.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use futures::FutureExt;
use sluice_proto::{
    ephemeral_stream_request, ephemeral_stream_response, ingest_record_batch_request,
    ingest_record_request, CloseStreamSignal, CreateIngestStreamResponse, EphemeralStreamRequest,
    EphemeralStreamResponse, IngestRecordResponse,
};
use sluice_wal::{DurableState, Lsn, WalError};
use tokio::sync::{mpsc, watch};
use tonic::{Status, Streaming};

use super::inbound::read_error_status;
use super::open::{open_stream, OpenedStream};
use crate::auth::Caller;
use crate::error::{Result, ServerError};
use crate::journal::frames::{encode_records, RecordFormat, KIND_RECORDS};
use crate::limits::StreamSlot;
use crate::pod::Pod;

/// Most requests taken into one run.
const MAX_RUN_REQUESTS: usize = 4096;
/// Most record bytes taken into one run.
const MAX_RUN_BYTES: usize = 8 << 20;
/// A stream waits while its table's memtable holds more than this many
/// flush thresholds (the sink is behind), instead of buffering without bound.
const MEMTABLE_LIMIT_FLUSHES: usize = 4;

type Tx = mpsc::Sender<Result<EphemeralStreamResponse, Status>>;

fn response(payload: ephemeral_stream_response::Payload) -> EphemeralStreamResponse {
    EphemeralStreamResponse {
        payload: Some(payload),
    }
}

/// `CloseStreamSignal`: the pod will end this stream in `grace`; the SDK stops sending,
/// waits for its acks and reconnects (through the router, to another pod).
fn close_signal(grace: std::time::Duration) -> EphemeralStreamResponse {
    response(ephemeral_stream_response::Payload::CloseStreamSignal(
        CloseStreamSignal {
            duration: Some(prost_types::Duration {
                seconds: grace.as_secs() as i64,
                nanos: grace.subsec_nanos() as i32,
            }),
        },
    ))
}

/// Sleeps until `deadline`, or forever when there is none.
async fn sleep_until_some(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Runs one stream to its end.
pub async fn run_stream(
    pod: Arc<Pod>,
    caller: Caller,
    header_table: Option<String>,
    mut inbound: Streaming<EphemeralStreamRequest>,
    tx: Tx,
    slot: StreamSlot,
) {
    let first = match inbound.message().await {
        Ok(Some(m)) => m,
        Ok(None) => return,
        Err(e) => {
            if let Some(status) = read_error_status(&e, pod.config.max_message_bytes) {
                let _ = tx.send(Err(status)).await;
            }
            return;
        }
    };
    let create = match first.payload {
        Some(ephemeral_stream_request::Payload::CreateStream(c)) => c,
        _ => {
            let _ = tx
                .send(Err(Status::failed_precondition(
                    "the first message of a stream must be create_stream",
                )))
                .await;
            return;
        }
    };
    let opened = match open_stream(&pod, &caller, header_table.as_deref(), create).await {
        Ok(o) => o,
        Err(e) => {
            metrics::counter!("sluice_streams_rejected_total").increment(1);
            let _ = tx.send(Err(e.to_status())).await;
            return;
        }
    };
    tracing::info!(stream_id = %opened.stream_id, table = opened.sink.name(), "stream opened");
    metrics::gauge!("sluice_streams_open").increment(1.0);
    let created = response(ephemeral_stream_response::Payload::CreateStreamResponse(
        CreateIngestStreamResponse {
            stream_id: Some(opened.stream_id.clone()),
        },
    ));
    if tx.send(Ok(created)).await.is_ok() {
        let mut state = StreamState::new(&pod, opened, tx, slot);
        let end = state.serve(&mut inbound).await;
        state.finish(end).await;
        pod.streams.closed(state.opened.key);
        tracing::info!(stream_id = %state.opened.stream_id, "stream ended");
    } else {
        pod.streams.closed(opened.key);
    }
    metrics::gauge!("sluice_streams_open").decrement(1.0);
}

/// Why the read loop stopped.
enum End {
    /// The client finished sending: ack everything, then end OK.
    ClientDone,
    /// The client went away.
    ClientGone,
    /// The pod is shutting down: ack what is durable, then ask to reconnect.
    Shutdown,
    /// A request was bad (or the WAL failed): ack the valid prefix, then fail.
    Failed(Status),
    /// The WAL's disk is full: ack what is durable now and fail at once with
    /// RESOURCE_EXHAUSTED. Records still held by the stalled writer are not waited for:
    /// they become durable (and reach Delta) once space returns, and the producer resends
    /// what it saw unacked (at-least-once, as across any reconnect).
    WalFull(Status),
}

impl End {
    /// How a failed run ends the stream.
    fn from_error(e: ServerError) -> End {
        match e {
            ServerError::Wal(WalError::NoSpace { .. }) => End::WalFull(e.to_status()),
            other => End::Failed(other.to_status()),
        }
    }
}

struct StreamState<'p> {
    pod: &'p Pod,
    opened: OpenedStream,
    tx: Tx,
    durable: watch::Receiver<DurableState>,
    /// `(frame end LSN, last offset in the frame)`, oldest first.
    pending: VecDeque<(Lsn, i64, usize)>,
    /// Record bytes logged but not yet acked (the sum over `pending`).
    inflight_bytes: usize,
    /// The stream's slot (freed when the stream ends); paces the principal.
    slot: StreamSlot,
    next_offset: i64,
}

impl<'p> StreamState<'p> {
    fn new(pod: &'p Pod, opened: OpenedStream, tx: Tx, slot: StreamSlot) -> Self {
        StreamState {
            pod,
            durable: pod.wal.subscribe(),
            opened,
            tx,
            pending: VecDeque::new(),
            inflight_bytes: 0,
            slot,
            next_offset: 0,
        }
    }

    async fn serve(&mut self, inbound: &mut Streaming<EphemeralStreamRequest>) -> End {
        let shutdown = self.pod.shutdown.clone();
        let draining = self.pod.draining.clone();
        let limits = &self.pod.config.limits;
        let mut idle_deadline = tokio::time::Instant::now() + limits.idle_stream_timeout;
        // Set once the pod drains: CloseStreamSignal was sent; the stream keeps reading and
        // acking until the client moves away or this passes.
        let mut close_deadline: Option<tokio::time::Instant> = None;
        loop {
            if let Err(end) = self.send_durable_acks().await {
                return end;
            }
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return End::Shutdown,
                _ = draining.cancelled(), if close_deadline.is_none() => {
                    let grace = self.pod.drain_grace();
                    close_deadline = Some(tokio::time::Instant::now() + grace);
                    if self.tx.send(Ok(close_signal(grace))).await.is_err() {
                        return End::ClientGone;
                    }
                }
                _ = sleep_until_some(close_deadline) => return End::Shutdown,
                changed = self.durable.changed() => {
                    if changed.is_err() {
                        return End::Failed(Status::unavailable("write-ahead log stopped"));
                    }
                }
                _ = tokio::time::sleep_until(idle_deadline), if self.pending.is_empty() => {
                    return End::Failed(Status::unavailable(format!(
                        "stream idle for {:?} (--idle-stream-timeout); closed, reconnect to continue",
                        limits.idle_stream_timeout
                    )));
                }
                // Back-pressure: read no more while too much awaits its ack.
                message = inbound.message(), if self.inflight_bytes <= limits.max_inflight_bytes => match message {
                    Ok(Some(first)) => {
                        idle_deadline = tokio::time::Instant::now() + limits.idle_stream_timeout;
                        let mut run = vec![first];
                        let mut bytes = 0;
                        let mut read_error = None;
                        while run.len() < MAX_RUN_REQUESTS && bytes < MAX_RUN_BYTES {
                            match inbound.message().now_or_never() {
                                Some(Ok(Some(m))) => {
                                    bytes += request_bytes(&m);
                                    run.push(m);
                                }
                                Some(Err(e)) => {
                                    read_error = Some(e);
                                    break;
                                }
                                _ => break,
                            }
                        }
                        if let Err(e) = self.process_run(run).await {
                            return End::from_error(e);
                        }
                        // An over-size or undecodable request right after the
                        // run: the run is logged (and acked), then its status.
                        if let Some(e) = read_error {
                            return match read_error_status(&e, self.pod.config.max_message_bytes) {
                                Some(status) => End::Failed(status),
                                None => End::ClientGone,
                            };
                        }
                    }
                    Ok(None) => return End::ClientDone,
                    Err(e) => {
                        return match read_error_status(&e, self.pod.config.max_message_bytes) {
                            Some(status) => End::Failed(status),
                            None => End::ClientGone,
                        }
                    }
                },
            }
        }
    }

    /// Sends one cumulative ack for everything now durable.
    async fn send_durable_acks(&mut self) -> std::result::Result<(), End> {
        let state = self.durable.borrow_and_update().clone();
        if let Some(reason) = state.failed {
            return Err(End::Failed(Status::unavailable(format!(
                "write-ahead log failed on this pod ({reason}); records not acked must be resent"
            ))));
        }
        let mut top = None;
        while let Some(&(lsn, offset, bytes)) = self.pending.front() {
            if lsn > state.durable {
                break;
            }
            top = Some(offset);
            self.inflight_bytes = self.inflight_bytes.saturating_sub(bytes);
            self.pending.pop_front();
        }
        if let Some(offset) = top {
            let ack = response(ephemeral_stream_response::Payload::IngestRecordResponse(
                IngestRecordResponse {
                    durability_ack_up_to_offset: Some(offset),
                },
            ));
            if self.tx.send(Ok(ack)).await.is_err() {
                return Err(End::ClientGone);
            }
        }
        Ok(())
    }

    /// Waits until every logged record is durable and acked.
    async fn drain_acks(&mut self) -> std::result::Result<(), End> {
        while !self.pending.is_empty() {
            self.send_durable_acks().await?;
            if self.pending.is_empty() {
                break;
            }
            if self.durable.changed().await.is_err() {
                return Err(End::Failed(Status::unavailable("write-ahead log stopped")));
            }
        }
        Ok(())
    }

    async fn finish(&mut self, end: End) {
        let end = match end {
            End::ClientGone => return,
            End::WalFull(status) => match self.send_durable_acks().await {
                Ok(()) => End::Failed(status),
                Err(e) => e,
            },
            other => match self.drain_acks().await {
                Ok(()) => other,
                Err(e) => e,
            },
        };
        match end {
            End::ClientDone | End::ClientGone => {}
            End::Shutdown => {
                let _ = self
                    .tx
                    .send(Ok(close_signal(std::time::Duration::ZERO)))
                    .await;
                let _ = self
                    .tx
                    .send(Err(Status::unavailable(
                        "this pod is shutting down; reconnect to continue",
                    )))
                    .await;
            }
            End::Failed(status) | End::WalFull(status) => {
                let _ = self.tx.send(Err(status)).await;
            }
        }
    }

    /// Parses, logs and appends one run of requests.
    async fn process_run(&mut self, run: Vec<EphemeralStreamRequest>) -> Result<()> {
        let mut records: Vec<(i64, Bytes)> = Vec::new();
        let mut last_ok = None;
        let mut rows_ok = 0;
        let mut failure = None;
        for request in run {
            match self.parse_request(request, &mut records) {
                Ok(offset) => {
                    last_ok = Some(offset);
                    rows_ok = self.opened.builder.len();
                    self.next_offset = offset + 1;
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let batch = self.opened.builder.finish();
        // A batch request that failed part-way left its leading records in
        // `records`; they are not acked and must not reach the WAL, or a
        // replay would commit them. One row per record of the valid requests.
        records.truncate(rows_ok);
        if let Some(last_offset) = last_ok {
            let batch = if batch.num_rows() > rows_ok {
                batch.slice(0, rows_ok)
            } else {
                batch
            };
            let batch = self.opened.sink.with_system_columns(
                batch,
                self.opened.key,
                records.iter().map(|(offset, _)| *offset),
            )?;
            let record_bytes: usize = records.iter().map(|(_, r)| r.len()).sum();
            metrics::counter!("sluice_ingest_records_total").increment(records.len() as u64);
            metrics::counter!("sluice_ingest_bytes_total").increment(record_bytes as u64);
            self.pod.load.record_ingress(record_bytes);
            let payload = encode_records(
                self.opened.key,
                records.iter().map(|(o, r)| (*o, r.as_ref())),
            );
            let memtable_limit = self
                .pod
                .config
                .flush_bytes
                .saturating_mul(MEMTABLE_LIMIT_FLUSHES);
            self.opened.sink.wait_for_room(memtable_limit).await;
            self.slot
                .throttle(
                    &self.pod.config.limits,
                    records.len() as u64,
                    record_bytes as u64,
                )
                .await;
            let reservation = self.pod.wal.reserve(payload.len()).await?;
            let lsn = self.opened.sink.append(
                &self.pod.wal,
                reservation,
                KIND_RECORDS,
                payload,
                Some(batch),
            )?;
            self.pod.streams.records_logged(self.opened.key, lsn);
            self.pending.push_back((lsn, last_offset, record_bytes));
            self.inflight_bytes += record_bytes;
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn check_offset(&self, offset: Option<i64>, what: &str) -> Result<i64> {
        let offset = offset.ok_or_else(|| {
            ServerError::InvalidArgument(format!(
                "{what} without offset_id (expected {})",
                self.next_offset
            ))
        })?;
        if offset != self.next_offset {
            return Err(ServerError::InvalidArgument(format!(
                "{what} has offset_id {offset}, expected {} (offsets must start at 0 and grow by 1)",
                self.next_offset
            )));
        }
        Ok(offset)
    }

    /// Validates one request, appends its rows to the builder and its raw
    /// records to `records`; returns its offset.
    fn parse_request(
        &mut self,
        request: EphemeralStreamRequest,
        records: &mut Vec<(i64, Bytes)>,
    ) -> Result<i64> {
        use ephemeral_stream_request::Payload;
        match request.payload {
            Some(Payload::IngestRecord(r)) => {
                let offset = self.check_offset(r.offset_id, "ingest_record")?;
                use ingest_record_request::Record;
                let record = match r.record {
                    Some(Record::ProtoEncodedRecord(b)) => self.parse_proto(offset, None, b)?,
                    Some(Record::JsonRecord(s)) => self.parse_json(offset, None, s)?,
                    Some(Record::AvroEncodedRecord(_)) => return Err(avro_unsupported(offset)),
                    None => {
                        return Err(ServerError::InvalidArgument(format!(
                            "ingest_record at offset {offset} carries no record"
                        )))
                    }
                };
                records.push((offset, record));
                Ok(offset)
            }
            Some(Payload::IngestRecordBatch(b)) => {
                let offset = self.check_offset(b.offset_id, "ingest_record_batch")?;
                use ingest_record_batch_request::Batch;
                let before = records.len();
                match b.batch {
                    Some(Batch::ProtoEncodedBatch(batch)) => {
                        for (i, r) in batch.records.into_iter().enumerate() {
                            let r = self.parse_proto(offset, Some(i), r)?;
                            records.push((offset, r));
                        }
                    }
                    Some(Batch::JsonBatch(batch)) => {
                        for (i, r) in batch.records.into_iter().enumerate() {
                            let r = self.parse_json(offset, Some(i), r)?;
                            records.push((offset, r));
                        }
                    }
                    Some(Batch::AvroBatch(_)) => return Err(avro_unsupported(offset)),
                    None => {}
                }
                if records.len() == before {
                    return Err(ServerError::InvalidArgument(format!(
                        "ingest_record_batch at offset {offset} is empty"
                    )));
                }
                Ok(offset)
            }
            Some(Payload::CreateStream(_)) => Err(ServerError::FailedPrecondition(
                "create_stream sent twice on one stream".into(),
            )),
            None => Err(ServerError::InvalidArgument(
                "request carries no payload".into(),
            )),
        }
    }

    /// RESOURCE_EXHAUSTED for a record over `--max-record-bytes`.
    fn check_record_size(&self, offset: i64, index: Option<usize>, len: usize) -> Result<()> {
        let limit = self.pod.config.limits.max_record_bytes;
        if len > limit {
            return Err(ServerError::ResourceExhausted(format!(
                "{}: record of {len} bytes exceeds the limit of {limit} bytes (--max-record-bytes)",
                place(offset, index)
            )));
        }
        Ok(())
    }

    fn parse_proto(&mut self, offset: i64, index: Option<usize>, record: Bytes) -> Result<Bytes> {
        self.check_record_size(offset, index, record.len())?;
        let plan = match (&self.opened.format, &self.opened.plan) {
            (RecordFormat::Proto, Some(plan)) => plan,
            _ => {
                return Err(ServerError::InvalidArgument(format!(
                    "{}: proto record on a JSON stream",
                    place(offset, index)
                )))
            }
        };
        self.opened
            .builder
            .append_proto(plan, &record)
            .map_err(|e| ServerError::InvalidArgument(format!("{}: {e}", place(offset, index))))?;
        Ok(record)
    }

    fn parse_json(&mut self, offset: i64, index: Option<usize>, record: String) -> Result<Bytes> {
        self.check_record_size(offset, index, record.len())?;
        if self.opened.format != RecordFormat::Json {
            return Err(ServerError::InvalidArgument(format!(
                "{}: JSON record on a PROTO stream",
                place(offset, index)
            )));
        }
        self.opened
            .builder
            .append_json(&record)
            .map_err(|e| ServerError::InvalidArgument(format!("{}: {e}", place(offset, index))))?;
        Ok(Bytes::from(record.into_bytes()))
    }
}

fn place(offset: i64, index: Option<usize>) -> String {
    match index {
        Some(i) => format!("record {i} of the batch at offset {offset}"),
        None => format!("record at offset {offset}"),
    }
}

fn avro_unsupported(offset: i64) -> ServerError {
    ServerError::Unimplemented(format!(
        "offset {offset}: AVRO records are not supported by Sluice yet"
    ))
}

fn request_bytes(request: &EphemeralStreamRequest) -> usize {
    use ephemeral_stream_request::Payload;
    match &request.payload {
        Some(Payload::IngestRecord(r)) => match &r.record {
            Some(ingest_record_request::Record::ProtoEncodedRecord(b)) => b.len(),
            Some(ingest_record_request::Record::JsonRecord(s)) => s.len(),
            Some(ingest_record_request::Record::AvroEncodedRecord(b)) => b.len(),
            None => 0,
        },
        Some(Payload::IngestRecordBatch(b)) => match &b.batch {
            Some(ingest_record_batch_request::Batch::ProtoEncodedBatch(x)) => {
                x.records.iter().map(|r| r.len()).sum()
            }
            Some(ingest_record_batch_request::Batch::JsonBatch(x)) => {
                x.records.iter().map(|r| r.len()).sum()
            }
            Some(ingest_record_batch_request::Batch::AvroBatch(x)) => {
                x.records.iter().map(|r| r.len()).sum()
            }
            None => 0,
        },
        _ => 0,
    }
}
