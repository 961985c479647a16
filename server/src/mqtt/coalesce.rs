//! Gathers the one-record PUBLISHes of many connections to one table into shared writes.
//!
//! A fleet of devices publishes one small record per PUBLISH. Written one by one, each
//! record would cost a batch builder, a one-row Arrow batch, a WAL frame and a memtable
//! entry of its own (measured: ~50 µs of pod CPU per record at 1 000 connections). Here each
//! table has one gathering task: a PUBLISH hands it the record and waits for its answer;
//! the task takes every record waiting (up to [`MAX_RECORDS`] or [`MAX_BYTES`]), parses each
//! into one builder — a record that does not fit is answered on its own (0x99 naming the
//! field) and leaves the builder as it was — and writes the rest as one REST insert
//! (`rest::insert_parsed`: one WAL frame, one batch). Every record of the write is answered
//! once that frame is durable, so the PUBACK rule is unchanged. Up to [`WRITES_IN_FLIGHT`]
//! writes per table run at once, so the WAL's group commit can share fdatasyncs between
//! them; while they are all busy, records wait in the channel (bounded: a full channel makes
//! the PUBLISH wait, which stops its connection being read).
//!
//! `sluice_mqtt_gathered_writes_total` counts the gathered writes (records per write =
//! `sluice_mqtt_records_total` over it, less the arrays' records).
//!
//! A write holding QoS 2 publishes logs their (client id, packet id) pairs in its frame
//! (kind 7, `journal::qos2`); one of QoS 0/1 publishes only is a plain records frame.
//!
//! Payloads holding a JSON array of records are all-or-nothing and are written on their
//! own (`publish::write`), not here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::journal::frames::Qos2Pair;
use crate::pod::Pod;
use crate::rest::{RestError, RestIngest};
use crate::sink::SharedSink;

use super::refusal::{refusal, Refusal};
use super::wire::reason;

/// Records in one gathered write.
pub const MAX_RECORDS: usize = 1024;
/// Record bytes in one gathered write.
pub const MAX_BYTES: usize = 1 << 20;
/// Gathered writes of one table under way at once.
pub const WRITES_IN_FLIGHT: usize = 4;
/// Records waiting for a table's task before a PUBLISH waits to hand its record over.
const QUEUE: usize = 4 * MAX_RECORDS;

/// One record waiting to be written, with where its answer goes.
struct Waiting {
    sink: SharedSink,
    /// The record's JSON text (a trimmed JSON object).
    record: Bytes,
    /// A QoS 2 publish's (client id, packet id), logged in the same frame as its record.
    qos2: Option<Qos2Pair>,
    answer: oneshot::Sender<Result<usize, Refusal>>,
}

/// The gathering tasks of a pod's MQTT listener, one per table (started on first use).
pub struct Coalescer {
    pod: Arc<Pod>,
    rest: Arc<RestIngest>,
    tables: Mutex<HashMap<String, mpsc::Sender<Waiting>>>,
}

impl Coalescer {
    /// Gathering over `rest` on `pod`.
    pub fn new(pod: Arc<Pod>, rest: Arc<RestIngest>) -> Coalescer {
        Coalescer {
            pod,
            rest,
            tables: Mutex::new(HashMap::new()),
        }
    }

    /// Writes one record (a JSON object's text) into `table` through its gathering task;
    /// returns 1 once it is durable, or its refusal. `qos2`: a QoS 2 publish's pair, made
    /// durable in the same frame as the record.
    pub async fn write(
        &self,
        table: &str,
        sink: SharedSink,
        record: Bytes,
        qos2: Option<Qos2Pair>,
    ) -> Result<usize, Refusal> {
        let (answer, answered) = oneshot::channel();
        let tx = self.sender(table);
        tx.send(Waiting {
            sink,
            record,
            qos2,
            answer,
        })
        .await
        .map_err(|_| gone())?;
        answered.await.map_err(|_| gone())?
    }

    fn sender(&self, table: &str) -> mpsc::Sender<Waiting> {
        let mut tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = tables.get(table).filter(|tx| !tx.is_closed()) {
            return tx.clone();
        }
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(gather(self.pod.clone(), self.rest.clone(), rx));
        tables.insert(table.to_string(), tx.clone());
        tx
    }
}

fn gone() -> Refusal {
    Refusal::new(
        reason::UNSPECIFIED,
        tonic::Code::Unavailable,
        "the table's write task ended; retry",
    )
}

/// A table's gathering task: runs until every sender is gone.
async fn gather(pod: Arc<Pod>, rest: Arc<RestIngest>, mut rx: mpsc::Receiver<Waiting>) {
    let room = Arc::new(Semaphore::new(WRITES_IN_FLIGHT));
    // A record of another sink (the table was replaced) starts the next write.
    let mut carried: Option<Waiting> = None;
    loop {
        let Ok(permit) = room.clone().acquire_owned().await else {
            return;
        };
        let first = match carried.take() {
            Some(w) => w,
            None => match rx.recv().await {
                Some(w) => w,
                None => return,
            },
        };
        let mut batch = vec![first];
        let mut bytes = batch[0].record.len();
        while batch.len() < MAX_RECORDS && bytes < MAX_BYTES {
            match rx.try_recv() {
                Ok(w) if Arc::ptr_eq(&w.sink, &batch[0].sink) => {
                    bytes += w.record.len();
                    batch.push(w);
                }
                Ok(w) => {
                    carried = Some(w);
                    break;
                }
                Err(_) => break,
            }
        }
        let (pod, rest) = (pod.clone(), rest.clone());
        tokio::spawn(async move {
            write_batch(&pod, &rest, batch).await;
            drop(permit);
        });
    }
}

/// Parses each record of `batch` (all of one sink) into one builder, answers the ones that
/// do not fit, writes the rest as one insert and answers them with its outcome.
async fn write_batch(pod: &Pod, rest: &RestIngest, batch: Vec<Waiting>) {
    let Some(sink) = batch.first().map(|w| w.sink.clone()) else {
        return;
    };
    let mut builder = match sink.batch_builder() {
        Ok(b) => b,
        Err(e) => {
            let refused = refusal(RestError::Server(e));
            for w in batch {
                let _ = w.answer.send(Err(refused.clone()));
            }
            return;
        }
    };
    let (records, answers): (Vec<Bytes>, Vec<_>) = batch
        .into_iter()
        .map(|w| (w.record, (w.answer, w.qos2)))
        .unzip();
    let mut texts: Vec<&str> = Vec::with_capacity(records.len());
    let mut waiting = Vec::with_capacity(records.len());
    let mut qos2 = Vec::new();
    for (record, (answer, pair)) in records.iter().zip(answers) {
        let parsed = std::str::from_utf8(record)
            .map_err(|e| {
                Refusal::new(
                    reason::PAYLOAD_FORMAT_INVALID,
                    tonic::Code::InvalidArgument,
                    format!("the payload is not UTF-8 JSON: {e}"),
                )
            })
            .and_then(|text| {
                crate::rest::append_record(pod, &mut builder, 0, text)
                    .map(|()| text)
                    .map_err(refusal)
            });
        match parsed {
            Ok(text) => {
                texts.push(text);
                waiting.push(answer);
                qos2.extend(pair);
            }
            Err(refused) => {
                let _ = answer.send(Err(refused));
            }
        }
    }
    if texts.is_empty() {
        return;
    }
    metrics::counter!("sluice_mqtt_gathered_writes_total").increment(1);
    let outcome = crate::rest::insert_parsed(pod, rest, &sink, builder, &texts, qos2)
        .await
        .map(|_| 1)
        .map_err(refusal);
    for answer in waiting {
        let _ = answer.send(outcome.clone());
    }
}
