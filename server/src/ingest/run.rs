//! One run of a stream's requests (those already waiting in the HTTP/2
//! buffer, taken together): checked, and parsed into one Arrow batch — or
//! kept as its records, parsed at the flush (`sink::deferred`: small runs,
//! and every run a check can clear without writing columns) — and one WAL
//! frame, then, once the table's memtable has room and the principal's pace allows,
//! logged and appended through the table's sink and entered in the ack
//! ledger. If a request in the run is bad, the valid requests before it are
//! still logged (and acked), then the run fails with the bad request's error.
//! A resumed persistent stream's resent records (at or below its watermark)
//! are acked and dropped; its frames carry the stream's mark into the memtable
//! (its Delta `txn`) and raise its WAL watermark.

use std::sync::Arc;

use bytes::Bytes;
use futures::FutureExt;
use sluice_proto::EphemeralStreamRequest;

use super::acks::Acks;
use super::auto_evolve;
use super::inbound::Inbound;
use super::open::OpenedStream;
use super::request::{request_size, RequestSize};
use crate::error::{Result, ServerError};
use crate::journal::frames::{encode_records, KIND_RECORDS};
use crate::limits::StreamSlot;
use crate::pod::Pod;
use crate::sink::deferred::{self, RecordRun, Rows};
use crate::sink::{SharedSink, StreamMark};

/// Most requests taken into one run.
const MAX_RUN_REQUESTS: usize = 4096;
/// Most record bytes taken into one run.
const MAX_RUN_BYTES: usize = 8 << 20;
/// A stream waits while its table's memtable holds more than this many
/// flush thresholds (the sink is behind), instead of buffering without bound.
const MEMTABLE_LIMIT_FLUSHES: usize = 4;

/// A run of requests and the record bytes they carry in all.
pub struct Run {
    /// The requests, in the order read.
    pub requests: Vec<EphemeralStreamRequest>,
    /// Their records and those records' bytes, summed as they were read.
    pub size: RequestSize,
}

/// Takes `first` and the requests already waiting behind it into one run.
/// A read error right after the run is returned beside it: the run is
/// processed (and acked) first, then the error ends the stream.
///
/// `hint` is the length of the stream's previous run: the run's list starts
/// with room for that many (rounded up to a power of two) instead of growing
/// from one through every doubling (its reallocations were 1.9 % of the pod's
/// perf samples at 200-byte records, runs of ~120 requests).
pub fn gather(
    first: EphemeralStreamRequest,
    inbound: &mut impl Inbound,
    hint: usize,
) -> (Run, Option<tonic::Status>) {
    let mut requests = Vec::with_capacity(hint.clamp(1, MAX_RUN_REQUESTS).next_power_of_two());
    let mut size = request_size(&first);
    requests.push(first);
    let mut read_error = None;
    while requests.len() < MAX_RUN_REQUESTS && size.bytes < MAX_RUN_BYTES {
        match inbound.next_request().now_or_never() {
            Some(Ok(Some(m))) => {
                size += request_size(&m);
                requests.push(m);
            }
            Some(Err(e)) => {
                read_error = Some(e);
                break;
            }
            _ => break,
        }
    }
    let run = Run { requests, size };
    (run, read_error)
}

/// Counts `records` of `record_bytes` taken in, then waits until the table's memtable
/// has room and the principal's pace allows them (back-pressure: meanwhile the stream
/// is not read).
pub async fn wait_to_append(
    pod: &Pod,
    sink: &SharedSink,
    slot: &StreamSlot,
    records: usize,
    record_bytes: usize,
) {
    sink.ingress().streamed(records, record_bytes);
    pod.load.record_ingress(record_bytes);
    let memtable_limit = pod
        .config
        .flush_bytes
        .saturating_mul(MEMTABLE_LIMIT_FLUSHES);
    sink.wait_for_room(memtable_limit).await;
    slot.throttle(&pod.config.limits, records as u64, record_bytes as u64)
        .await;
}

/// Parses, logs and appends one run of requests of `stream`. On a table with
/// `sluice.autoEvolve = add-columns`, a JSON request with top-level keys the
/// stream's columns lack first gets them (`auto_evolve`): the requests
/// before it are logged, the table evolves, the stream's builder is made for
/// the new schema and the run goes on from that request.
pub async fn process_run(
    pod: &Pod,
    stream: &mut OpenedStream,
    slot: &StreamSlot,
    acks: &mut Acks,
    run: Run,
) -> Result<()> {
    let mut run = run;
    loop {
        match process_part(pod, stream, slot, acks, run).await? {
            None => return Ok(()),
            Some(rest) => {
                run = Run {
                    size: rest.iter().map(request_size).sum(),
                    requests: rest,
                };
            }
        }
    }
}

/// [`process_run`] up to the end of the run, its first failure or the first
/// request that needs new columns; `Some(rest)`: the table evolved for that
/// request, which with the requests after it is `rest`.
async fn process_part(
    pod: &Pod,
    stream: &mut OpenedStream,
    slot: &StreamSlot,
    acks: &mut Acks,
    run: Run,
) -> Result<Option<Vec<EphemeralStreamRequest>>> {
    let started = std::time::Instant::now();
    let auto_evolve = stream.parser.is_json() && stream.sink.auto_evolve();
    // One record per request is the common case (a batch request grows it further): grown
    // from empty through every doubling, its reallocations were 1.5 % of the pod's perf
    // samples at 200-byte records (3030aeb, runs of ~120 requests).
    let Run {
        requests: run,
        size,
    } = run;
    let mut records: Vec<(i64, Bytes)> = Vec::with_capacity(run.len());
    // A run of more than 32 records becomes a batch: its columns get their room first. A
    // smaller one goes on as its records, and is only checked: a flat table's protobuf
    // records then write none of the builder's columns. For 5 000 streams of one-request
    // runs, the reserve's visit of every (cache-cold) column was in 1.5 % of the pod's
    // samples, and writing a record into those columns and clearing them in 4.2 %.
    // Where the check writes nothing (`checks_cheaply`), every run goes on as its records:
    // the flush then parses them into batches of `commit::WRITE_ROWS` rows, with no batch
    // per run to finish, concatenate and free (`sink::deferred`).
    let check_only = size.records <= deferred::MAX_RECORDS || stream.parser.checks_cheaply();
    if !check_only {
        stream.parser.reserve(size.records, size.bytes);
    }
    let mut last_ok = None;
    let mut rows_ok = 0;
    let mut failure: Option<ServerError> = None;
    let mut evolve_for: Option<EphemeralStreamRequest> = None;
    let mut resent = None;
    let mut resent_requests = 0u64;
    let mut requests = run.into_iter();
    for request in requests.by_ref() {
        if let Some(offset) = stream.parser.already_durable(&request) {
            resent = resent.max(Some(offset));
            resent_requests += 1;
            continue;
        }
        if auto_evolve && auto_evolve::needs_columns(&stream.built_for, &request) {
            evolve_for = Some(request);
            break;
        }
        let parsed = match check_only {
            true => stream.parser.check(request, &mut records),
            false => stream.parser.parse(request, &mut records),
        };
        match parsed {
            Ok(offset) => {
                last_ok = Some(offset);
                // One record per row; a batch request failing part-way leaves its leading
                // records, which this count leaves out.
                rows_ok = records.len();
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    // A checked run goes on as its records, parsed again at the flush (`sink::deferred`),
    // as does a parsed one that kept no more than a small run's rows. A larger one becomes
    // a batch now.
    let batch = if check_only || rows_ok <= deferred::MAX_RECORDS {
        stream.parser.discard();
        None
    } else {
        Some(stream.parser.finish())
    };
    // A batch request that failed part-way left its leading records in
    // `records`; they are not acked and must not reach the WAL, or a
    // replay would commit them. One row per record of the valid requests.
    records.truncate(rows_ok);
    if let Some(offset) = resent {
        // Durable already: acked at once (LSN 0), never logged again.
        metrics::counter!("sluice_ingest_resent_dropped_total").increment(resent_requests);
        acks.logged(0, offset, 0);
    }
    if let Some(last_offset) = last_ok {
        let record_bytes: usize = records.iter().map(|(_, r)| r.len()).sum();
        let payload = encode_records(stream.key, records.iter().map(|(o, r)| (*o, r.as_ref())));
        let count = records.len();
        let rows = match batch {
            Some(batch) => {
                let batch = if batch.num_rows() > rows_ok {
                    batch.slice(0, rows_ok)
                } else {
                    batch
                };
                Rows::Batch(stream.sink.with_system_columns(
                    batch,
                    stream.key,
                    records.iter().map(|(offset, _)| *offset),
                )?)
            }
            None => Rows::Records(Arc::new(RecordRun::new(
                stream.parser.plan().clone(),
                stream.built_for.clone(),
                records,
                stream.key,
            ))),
        };
        wait_to_append(pod, &stream.sink, slot, count, record_bytes).await;
        let mark = stream.persistent.as_ref().map(|id| StreamMark {
            stream_id: id.clone(),
            offset: last_offset,
        });
        let lsn = stream
            .sink
            .append_rows(KIND_RECORDS, payload, Some(rows), mark)
            .await?;
        stream.logged.logged(lsn);
        if let Some(id) = &stream.persistent {
            pod.pstreams.wal_logged(id, last_offset, lsn);
        }
        acks.logged(lsn, last_offset, record_bytes);
        // Run taken from the stream → logged: parsing and the waits for room, pace and the
        // WAL's queue (the ack latency histogram starts where this ends).
        stream.sink.ingress().run_took(started.elapsed());
    }
    if let Some(request) = evolve_for {
        auto_evolve::evolve_for(pod, &stream.sink, &request).await?;
        let schema = stream.sink.schema();
        if auto_evolve::needs_columns(&schema, &request) {
            return Err(ServerError::Internal(format!(
                "auto-evolve of {} did not add the columns a record needs",
                stream.sink.name()
            )));
        }
        stream
            .parser
            .set_builder(stream.sink.batch_builder_for(&schema)?);
        stream.built_for = schema;
        let mut rest = vec![request];
        rest.extend(requests);
        return Ok(Some(rest));
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(None),
    }
}
