//! Start-up replay: re-parse the WAL records that a table has not committed
//! yet (frames ending after the table's txn version) into its memtable.
//!
//! Two passes over the log: the first collects stream-open frames (a stream's
//! open frame may have been re-logged after some of its records), the second
//! replays records frames. Replay never duplicates: a frame is replayed only
//! if it ends after the table's committed position, and the next commit
//! records the new position in the same atomic Delta commit as the rows.
//!
//! OTLP export frames name their table and are transcoded again as on the live path
//! (`crate::otlp`), with the offsets and arrival time they were logged with.
//!
//! Arrow Flight streams' arrow-batch frames are decoded under the schema of their open
//! frame and fitted to the table as on the live path (`crate::flight`).
//!
//! MQTT QoS 2 records frames (kind 7) replay like records frames; their (client id,
//! packet id) pairs and the kind-8 lists are folded in log order into the pairs still
//! received ([`ReplayReport::mqtt_received`]).
//!
//! Persistent streams: every records frame of a persistent stream's connection (its open
//! frame carries the stream id) counts toward the highest offset the WAL holds for that
//! stream ([`ReplayReport::persistent`]), committed or not; the replayed ones also carry
//! their stream's mark into the memtable, so the next commit writes the stream's `txn`.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::SchemaRef;
use sluice_wal::{Lsn, Wal};
use sluice_zeroparser::RecordBatchBuilder;

use super::frames::{
    decode_arrow, decode_keyed, decode_keys, decode_mqtt_ids, decode_mqtt_records, decode_otlp,
    decode_records, KeyRecord, Qos2Pair, Qos2State, StreamOpen, KIND_ARROW, KIND_KEYED_RECORDS,
    KIND_KEYS, KIND_MQTT_IDS, KIND_MQTT_RECORDS, KIND_OTLP, KIND_RECORDS, KIND_STREAM_OPEN,
};
use super::plan::RecordPlan;
use super::streams::StreamRegistry;
use crate::error::Result;
use crate::flight::conform::Conform;
use crate::flight::ipc::{decode_frame, schema_of};
use crate::sink::{Sinks, StreamMark};

/// What replay did.
#[derive(Debug, Default)]
pub struct ReplayReport {
    /// Records frames replayed.
    pub frames: usize,
    /// Rows put back into memtables.
    pub rows: usize,
    /// Persistent streams with records in the WAL: stream id → (highest offset, end LSN
    /// of the frame holding it).
    pub persistent: HashMap<String, (i64, Lsn)>,
    /// REST idempotency keys the WAL holds (keyed records frames and re-logged key
    /// lists, committed or not), each with the end LSN of its frame.
    pub keys: Vec<(KeyRecord, Lsn)>,
    /// MQTT QoS 2 publishes received and not released (kind-7 pairs and kind-8 lists folded
    /// in log order, committed or not), each with the end LSN of its newest frame.
    pub mqtt_received: HashMap<Qos2Pair, Lsn>,
}

struct ReplayStream {
    open: StreamOpen,
    payload: Arc<Vec<u8>>,
    open_end_lsn: u64,
    plan: Option<Option<RecordPlan>>,
    /// An Arrow stream's schema and its fit to the table (None: they no longer fit).
    arrow: Option<Option<(SchemaRef, Conform)>>,
    /// The plan and a builder under the columns the stream opened with, for
    /// records the table's columns no longer take (None: none recorded, the
    /// same as the table's, or they do not compile).
    opened: Option<Option<(RecordPlan, RecordBatchBuilder)>>,
}

/// The plan and builder of `open`'s own columns, when they differ from the
/// table's current ones (`sink`'s) and still compile.
fn opened_under(
    open: &StreamOpen,
    sink: &crate::sink::SharedSink,
) -> Option<(RecordPlan, RecordBatchBuilder)> {
    let schema = sluice_zeroparser::TableSchema::parse(open.columns.as_deref()?).ok()?;
    if schema == *sink.schema() {
        return None;
    }
    let plan = RecordPlan::compile(
        open.format,
        &open.descriptor,
        &schema,
        sink.keeps_rescued_data(),
    )
    .ok()?;
    Some((plan, sink.batch_builder_for(&schema).ok()?))
}

/// Replays the records of `wal` that their table in `sinks` has not
/// committed into its memtable, and registers their streams in `registry`
/// (so their open frames outlive a purge while still needed).
pub fn replay(wal: &Wal, sinks: &Sinks, registry: &StreamRegistry) -> Result<ReplayReport> {
    let mut streams: HashMap<u64, ReplayStream> = HashMap::new();
    for frame in wal.read_from(0)? {
        let frame = frame?;
        if frame.kind == KIND_STREAM_OPEN {
            let open = StreamOpen::decode(&frame.payload)?;
            streams.insert(
                open.stream_key,
                ReplayStream {
                    open,
                    payload: Arc::new(frame.payload),
                    open_end_lsn: frame.end_lsn,
                    plan: None,
                    arrow: None,
                    opened: None,
                },
            );
        }
    }
    let mut report = ReplayReport::default();
    let mut builders: HashMap<String, RecordBatchBuilder> = HashMap::new();
    for frame in wal.read_from(0)? {
        let frame = frame?;
        let payload = match frame.kind {
            KIND_ARROW => {
                replay_arrow(
                    &frame.payload,
                    frame.end_lsn,
                    &mut streams,
                    sinks,
                    registry,
                    &mut report,
                )?;
                continue;
            }
            KIND_OTLP => {
                let otlp = decode_otlp(&frame.payload)?;
                let Some(sink) = sinks.get(&otlp.table) else {
                    continue; // table dropped
                };
                if frame.end_lsn <= sink.committed_lsn() {
                    continue;
                }
                if let Some(batch) = crate::otlp::replay::replay_rows(&otlp, &sink)? {
                    report.rows += batch.num_rows();
                    report.frames += 1;
                    sink.append_replayed(batch, frame.end_lsn, None)?;
                }
                continue;
            }
            KIND_RECORDS => &frame.payload[..],
            KIND_KEYED_RECORDS => {
                let (key, at_ms, rest) = decode_keyed(&frame.payload)?;
                let table = decode_records(rest)
                    .ok()
                    .and_then(|r| streams.get(&r.stream_key))
                    .map(|s| s.open.table.clone());
                if let Some(table) = table {
                    report
                        .keys
                        .push((KeyRecord { table, key, at_ms }, frame.end_lsn));
                }
                rest
            }
            KIND_KEYS => {
                for key in decode_keys(&frame.payload)? {
                    report.keys.push((key, frame.end_lsn));
                }
                continue;
            }
            KIND_MQTT_RECORDS => {
                let (pairs, rest) = decode_mqtt_records(&frame.payload)?;
                for pair in pairs {
                    report.mqtt_received.insert(pair, frame.end_lsn);
                }
                rest
            }
            KIND_MQTT_IDS => {
                let (state, pairs) = decode_mqtt_ids(&frame.payload)?;
                for pair in pairs {
                    match state {
                        Qos2State::Received => report.mqtt_received.insert(pair, frame.end_lsn),
                        Qos2State::Released => report.mqtt_received.remove(&pair),
                    };
                }
                continue;
            }
            _ => continue,
        };
        let records = decode_records(payload)?;
        let Some(stream) = streams.get_mut(&records.stream_key) else {
            tracing::error!(
                lsn = frame.lsn,
                "WAL records frame of unknown stream {}; skipped",
                records.stream_key
            );
            continue;
        };
        let last_offset = records.records.iter().map(|(o, _)| *o).max();
        let mark = match (&stream.open.persistent_id, last_offset) {
            (Some(id), Some(offset)) => {
                let seen = report.persistent.entry(id.clone()).or_insert((offset, 0));
                if seen.0 <= offset {
                    *seen = (offset, frame.end_lsn);
                }
                Some(StreamMark {
                    stream_id: Arc::from(id.as_str()),
                    offset,
                })
            }
            _ => None,
        };
        let Some(sink) = sinks.get(&stream.open.table) else {
            continue; // table dropped
        };
        if frame.end_lsn <= sink.committed_lsn() {
            continue;
        }
        let plan = stream.plan.get_or_insert_with(|| {
            match RecordPlan::compile(
                stream.open.format,
                &stream.open.descriptor,
                &sink.schema(),
                sink.keeps_rescued_data(),
            ) {
                Ok(p) => Some(p),
                Err(e) => {
                    tracing::error!(
                        table = sink.name(),
                        "replay: descriptor no longer fits: {e}"
                    );
                    None
                }
            }
        });
        let builder = match builders.entry(sink.name().to_string()) {
            Entry::Occupied(at) => at.into_mut(),
            Entry::Vacant(at) => at.insert(sink.batch_builder()?),
        };
        let mut offsets = Vec::with_capacity(records.records.len());
        let mut opened_offsets = Vec::new();
        for (offset, record) in &records.records {
            let result = plan
                .as_ref()
                .and_then(|plan| plan.append_to(builder, record));
            let error = match result {
                Some(Ok(())) => {
                    offsets.push(*offset);
                    continue;
                }
                Some(Err(e)) => e.to_string(),
                None if plan.is_none() => "the descriptor no longer fits the table".to_string(),
                None => continue,
            };
            // A column the record writes was dropped or renamed since the
            // stream opened: its rows are built as the live path built them,
            // and fitted to the table when flushed (`sink::fit`).
            let opened = stream
                .opened
                .get_or_insert_with(|| opened_under(&stream.open, &sink));
            if let Some((plan, old)) = opened.as_mut() {
                if let Some(Ok(())) = plan.append_to(old, record) {
                    opened_offsets.push(*offset);
                    continue;
                }
            }
            tracing::error!(
                table = sink.name(),
                offset,
                "replay: record rejected: {error}"
            );
        }
        let batch =
            sink.with_system_columns(builder.finish(), records.stream_key, offsets.into_iter())?;
        report.rows += batch.num_rows();
        report.frames += 1;
        sink.append_replayed(batch, frame.end_lsn, mark.clone())?;
        if let Some(Some((_, old))) = stream.opened.as_mut() {
            if !opened_offsets.is_empty() {
                let batch = sink.with_system_columns(
                    old.finish(),
                    records.stream_key,
                    opened_offsets.into_iter(),
                )?;
                report.rows += batch.num_rows();
                sink.append_replayed(batch, frame.end_lsn, None)?;
            }
        }
        registry.register(
            records.stream_key,
            &stream.open.table,
            stream.payload.clone(),
            stream.open_end_lsn,
            false,
        );
        registry.records_logged(records.stream_key, frame.end_lsn);
    }
    Ok(report)
}

/// Replays one arrow-batch frame (Arrow Flight streams are never persistent): its IPC
/// messages decoded under the stream's schema, fitted to the table as on the live path.
fn replay_arrow(
    payload: &[u8],
    end_lsn: Lsn,
    streams: &mut HashMap<u64, ReplayStream>,
    sinks: &Sinks,
    registry: &StreamRegistry,
    report: &mut ReplayReport,
) -> Result<()> {
    let frame = decode_arrow(payload)?;
    let Some(stream) = streams.get_mut(&frame.stream_key) else {
        tracing::error!(
            lsn = end_lsn,
            "WAL arrow frame of unknown stream {}; skipped",
            frame.stream_key
        );
        return Ok(());
    };
    let Some(sink) = sinks.get(&stream.open.table) else {
        return Ok(()); // table dropped
    };
    if end_lsn <= sink.committed_lsn() {
        return Ok(());
    }
    if stream.arrow.is_none() {
        let target = sink.batch_builder()?.arrow_schema();
        let fitted = schema_of(&stream.open.descriptor)
            .map_err(|e| e.to_string())
            .and_then(|schema| {
                let conform = Conform::new(&sink.schema(), &schema, target)?;
                Ok((Arc::new(schema), conform))
            });
        stream.arrow = Some(match fitted {
            Ok(fitted) => Some(fitted),
            Err(e) => {
                tracing::error!(
                    table = sink.name(),
                    "replay: Arrow schema no longer fits: {e}"
                );
                None
            }
        });
    }
    let Some(Some((schema, conform))) = &stream.arrow else {
        return Ok(());
    };
    let batch = decode_frame(schema.clone(), frame.messages.iter().copied())
        .map_err(|e| e.to_string())
        .and_then(|batch| conform.apply(&batch));
    let batch = match batch {
        Ok(batch) => batch,
        Err(e) => {
            tracing::error!(
                table = sink.name(),
                offset = frame.offset,
                "replay: arrow batch rejected: {e}"
            );
            return Ok(());
        }
    };
    let rows = batch.num_rows();
    let batch = sink.with_system_columns(
        batch,
        frame.stream_key,
        std::iter::repeat_n(frame.offset, rows),
    )?;
    report.rows += rows;
    report.frames += 1;
    sink.append_replayed(batch, end_lsn, None)?;
    registry.register(
        frame.stream_key,
        &stream.open.table,
        stream.payload.clone(),
        stream.open_end_lsn,
        false,
    );
    registry.records_logged(frame.stream_key, end_lsn);
    Ok(())
}
