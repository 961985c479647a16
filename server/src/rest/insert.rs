//! One REST insert, after the caller and the table were checked: claim the idempotency
//! key, parse every record into one Arrow batch (the first bad record refuses the whole
//! request, naming its index and field; nothing is written), log the records as one WAL
//! frame of the table's REST stream, add the batch to the memtable, and return once the
//! frame is durable. The WAL's group commit shares one fdatasync among all requests
//! waiting at that moment; the rows reach Delta with the memtable's next flush, so a
//! small request never costs a Delta commit of its own.
//!
//! Each table has one REST stream per pod process: a stream-open frame (JSON records)
//! logged on the table's first REST insert and kept in the stream registry (re-logged
//! before a purge), so replay re-parses REST records like a stream's. Its offsets number
//! the records in the order they were parsed (`_sluice_offset` is unique per REST
//! stream, not ordered by arrival across concurrent requests).
//!
//! A keyed request claims its key in the pod's WAL index first and, in a cluster, then
//! in etcd (after its records parsed, so a bad request costs no etcd call); another
//! pod's claim answers 200 (durable) or 503 with `Retry-After` (pending). Its write runs
//! as a task of its own and settles the claim: durable once the frame is durable,
//! released if the WAL refused the frame.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow_array::RecordBatch;
use sluice_wal::Wal;
use sluice_zeroparser::RecordBatchBuilder;
use tokio::sync::OnceCell;

use super::error::RestError;
use super::idempotency::{now_ms, Claim, IdempotencyIndex, KeyGuard, MAX_KEY_BYTES};
use crate::cluster::idem_claims::{ClaimOutcome, ClusterKeys, Settle, Ticket};
use crate::error::{Result, ServerError};
use crate::journal::frames::{
    encode_keyed, encode_mqtt_records, encode_records, Qos2Pair, RecordFormat, StreamOpen,
    KIND_KEYED_RECORDS, KIND_MQTT_RECORDS, KIND_RECORDS, KIND_STREAM_OPEN,
};
use crate::journal::{Qos2Ledger, StreamRegistry};
use crate::pod::Pod;
use crate::sink::SharedSink;

/// A REST request waits while its table's memtable holds more than this many flush
/// thresholds (as streams do).
pub const MEMTABLE_LIMIT_FLUSHES: usize = 4;
/// How often a request waiting on another with the same key looks again.
const KEY_WAIT_POLL: Duration = Duration::from_millis(20);
/// `Retry-After` of a key another live pod (or this one) is writing.
const KEY_PENDING_RETRY_SECS: u64 = 1;
/// `Retry-After` of a key whose pod is gone (back after its restart and replay).
const KEY_FENCED_RETRY_SECS: u64 = 5;
/// Test hook: with this variable set to a duration (`300ms`), every REST insert waits that
/// long after its records are durable before it answers (and, in a cluster, before it
/// marks its key durable in etcd), so a test can SIGKILL the pod between the write and
/// the answer.
pub const PAUSE_AFTER_DURABLE_ENV: &str = "SLUICE_TEST_REST_PAUSE_AFTER_DURABLE";

/// The REST side of a pod: each table's REST stream and the pod's idempotency keys.
pub struct RestIngest {
    streams: Mutex<HashMap<String, Arc<OnceCell<RestStream>>>>,
    /// Keys seen within the window.
    pub keys: Arc<IdempotencyIndex>,
    pause_after_durable: Option<Duration>,
}

struct RestStream {
    key: u64,
    next_offset: AtomicI64,
}

/// What an accepted request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inserted {
    /// Records made durable by this request (0 for a retry of a key already seen).
    pub records: usize,
    /// Whether the key had been seen: acknowledged without writing.
    pub duplicate: bool,
}

impl RestIngest {
    /// The REST side over `keys` (the test hook read from the environment).
    pub fn new(keys: Arc<IdempotencyIndex>) -> RestIngest {
        let pause_after_durable = std::env::var(PAUSE_AFTER_DURABLE_ENV)
            .ok()
            .and_then(|v| humantime::parse_duration(&v).ok());
        RestIngest {
            streams: Mutex::new(HashMap::new()),
            keys,
            pause_after_durable,
        }
    }

    /// The REST stream of `sink`'s table, its open frame logged on first use.
    async fn stream(&self, pod: &Pod, sink: &SharedSink) -> Result<u64> {
        let cell = {
            let mut map = self
                .streams
                .lock()
                .map_err(|_| ServerError::Internal("REST streams poisoned".into()))?;
            map.entry(sink.name().to_string()).or_default().clone()
        };
        let stream = cell
            .get_or_try_init(|| async {
                let key = rand::random::<u64>();
                let open = StreamOpen {
                    stream_key: key,
                    table: sink.name().to_string(),
                    format: RecordFormat::Json,
                    descriptor: Vec::new(),
                    persistent_id: None,
                    columns: Some(sink.schema().to_sql()),
                };
                let payload = Arc::new(open.encode());
                let lsn = sink
                    .append(KIND_STREAM_OPEN, payload.as_ref().clone(), None)
                    .await?;
                pod.streams.register(key, sink.name(), payload, lsn, true);
                pod.streams.mark_internal(key);
                Ok::<_, ServerError>(RestStream {
                    key,
                    next_offset: AtomicI64::new(0),
                })
            })
            .await?;
        Ok(stream.key)
    }

    fn offsets(&self, table: &str, count: usize) -> Result<i64> {
        let map = self
            .streams
            .lock()
            .map_err(|_| ServerError::Internal("REST streams poisoned".into()))?;
        let stream = map
            .get(table)
            .and_then(|c| c.get())
            .ok_or_else(|| ServerError::Internal(format!("no REST stream for {table}")))?;
        Ok(stream
            .next_offset
            .fetch_add(count as i64, Ordering::Relaxed))
    }
}

/// Claims `key` for `table`: None when a request with it is durable already.
async fn claim(keys: &IdempotencyIndex, table: &str, key: &str) -> Result<Option<KeyGuard>> {
    if key.is_empty() || key.len() > MAX_KEY_BYTES {
        return Err(ServerError::InvalidArgument(format!(
            "Idempotency-Key must be 1 to {MAX_KEY_BYTES} bytes"
        )));
    }
    loop {
        match keys.claim(table, key, now_ms())? {
            Claim::Seen => return Ok(None),
            Claim::Mine(guard) => return Ok(Some(guard)),
            Claim::Wait(notify) => {
                let _ = tokio::time::timeout(KEY_WAIT_POLL, notify.notified()).await;
            }
        }
    }
}

/// Writes `records` (JSON object texts) into `sink`'s table, all or nothing, and returns
/// once they are durable. `idempotency_key`: a retry of a request with this key within
/// the window is acknowledged without writing — on this pod (its WAL index) and, in a
/// cluster, on any pod (the key's claim in etcd, `cluster::idem_claims`).
pub async fn insert(
    pod: &Pod,
    rest: &RestIngest,
    sink: &SharedSink,
    records: &[&str],
    idempotency_key: Option<&str>,
) -> std::result::Result<Inserted, RestError> {
    refuse_if_shutting_down(pod)?;
    let local = match idempotency_key {
        Some(key) => match claim(&rest.keys, sink.name(), key).await? {
            Some(guard) => Some((key, guard)),
            None => return Ok(duplicate()),
        },
        None => None,
    };
    let mut builder = sink.batch_builder()?;
    for (i, record) in records.iter().enumerate() {
        append_record(pod, &mut builder, i, record)?;
    }
    write_parsed(pod, rest, sink, builder, records, local, Vec::new()).await
}

/// Writes `records`, already parsed into `builder` (one row each, in order, by
/// [`append_record`]), with no idempotency key; returns once they are durable. For callers
/// that gather the records of many small requests into one write (the MQTT front door).
/// `qos2`: the MQTT QoS 2 publishes among them (client id, packet id), logged in the same
/// frame (kind 7) and marked received in the pod's ledger at the append; empty: a plain
/// records frame (kind 2).
pub async fn insert_parsed(
    pod: &Pod,
    rest: &RestIngest,
    sink: &SharedSink,
    builder: RecordBatchBuilder,
    records: &[&str],
    qos2: Vec<Qos2Pair>,
) -> std::result::Result<Inserted, RestError> {
    refuse_if_shutting_down(pod)?;
    write_parsed(pod, rest, sink, builder, records, None, qos2).await
}

/// Checks record `i`'s size and parses it into `builder`; on error the builder is as before.
pub fn append_record(
    pod: &Pod,
    builder: &mut RecordBatchBuilder,
    i: usize,
    record: &str,
) -> std::result::Result<(), RestError> {
    let max_record = pod.config.limits.max_record_bytes;
    if record.len() > max_record {
        return Err(ServerError::InvalidArgument(format!(
            "record {i}: {} bytes, over the record limit of {max_record}",
            record.len()
        ))
        .into());
    }
    builder
        .append_json(record)
        .map_err(|e| ServerError::InvalidArgument(format!("record {i}: {e}")).into())
}

fn refuse_if_shutting_down(pod: &Pod) -> std::result::Result<(), RestError> {
    if pod.is_shutting_down() {
        return Err(ServerError::Unavailable(
            "this pod is shutting down; retry (another pod or after the restart)".into(),
        )
        .into());
    }
    Ok(())
}

/// The write of a parsed request: the REST stream, the cluster claim of a keyed request,
/// the WAL frame and memtable batch, durability, metrics.
async fn write_parsed(
    pod: &Pod,
    rest: &RestIngest,
    sink: &SharedSink,
    mut builder: RecordBatchBuilder,
    records: &[&str],
    local: Option<(&str, KeyGuard)>,
    qos2: Vec<Qos2Pair>,
) -> std::result::Result<Inserted, RestError> {
    let stream_key = rest.stream(pod, sink).await?;
    let cluster = match (&local, &pod.idem_claims) {
        (Some((key, guard)), Some(keys)) => {
            match keys.claim(sink.name(), key, guard.at_ms()).await? {
                ClaimOutcome::Won(ticket) => Some((keys.clone(), ticket)),
                ClaimOutcome::Durable { .. } => return Ok(duplicate()),
                ClaimOutcome::Pending { pod: owner } => {
                    return Err(pending(keys, &owner, pod.pod_id()).await)
                }
            }
        }
        _ => None,
    };
    let prepared = (|| {
        let first = rest.offsets(sink.name(), records.len())?;
        let batch = sink.with_system_columns(
            builder.finish(),
            stream_key,
            (0..records.len()).map(|i| first + i as i64),
        )?;
        let frame = encode_records(
            stream_key,
            records
                .iter()
                .enumerate()
                .map(move |(i, r)| (first + i as i64, r.as_bytes())),
        );
        Ok::<_, ServerError>((batch, frame))
    })();
    let (batch, frame) = match prepared {
        Ok(prepared) => prepared,
        Err(e) => {
            if let Some((keys, ticket)) = cluster {
                keys.settle(ticket, Settle::Release).await;
            }
            return Err(e.into());
        }
    };
    let (kind, payload, local) = match local {
        Some((key, g)) => (
            KIND_KEYED_RECORDS,
            encode_keyed(key, g.at_ms(), &frame),
            Some(g),
        ),
        None if qos2.is_empty() => (KIND_RECORDS, frame, None),
        None => (KIND_MQTT_RECORDS, encode_mqtt_records(&qos2, &frame), None),
    };
    let bytes: usize = records.iter().map(|r| r.len()).sum();
    let write = Write {
        sink: sink.clone(),
        wal: pod.wal.clone(),
        streams: pod.streams.clone(),
        stream_key,
        kind,
        payload,
        batch,
        room: pod
            .config
            .flush_bytes
            .saturating_mul(MEMTABLE_LIMIT_FLUSHES),
        local,
        cluster,
        qos2,
        ledger: pod.qos2.clone(),
        pause: rest.pause_after_durable,
    };
    if write.local.is_some() {
        // A keyed write runs on its own, so a client hanging up cannot cut it between the
        // WAL append and settling its key.
        tokio::spawn(write.run())
            .await
            .map_err(|e| ServerError::Internal(format!("REST write task: {e}")))??;
    } else {
        write.run().await?;
    }
    sink.ingress().written(records.len(), bytes);
    pod.load.record_ingress(bytes);
    Ok(Inserted {
        records: records.len(),
        duplicate: false,
    })
}

fn duplicate() -> Inserted {
    metrics::counter!("sluice_rest_duplicate_requests_total").increment(1);
    Inserted {
        records: 0,
        duplicate: true,
    }
}

/// The 503 for a key `owner` claimed and has not settled.
async fn pending(keys: &ClusterKeys, owner: &str, me: &str) -> RestError {
    metrics::counter!("sluice_rest_key_pending_refusals_total").increment(1);
    let registered = owner == me || keys.registered(owner).await.unwrap_or(true);
    let (message, retry_after_secs) = if registered {
        (
            format!(
                "a request with this Idempotency-Key is being written by pod `{owner}`; \
                 retry to learn its outcome"
            ),
            KEY_PENDING_RETRY_SECS,
        )
    } else {
        (
            format!(
                "a request with this Idempotency-Key was being written by pod `{owner}`, \
                 which is not registered: the key is fenced until that pod is back and \
                 has replayed its WAL"
            ),
            KEY_FENCED_RETRY_SECS,
        )
    };
    RestError::KeyPending {
        message,
        retry_after_secs,
    }
}

/// One request's write, owned.
struct Write {
    sink: SharedSink,
    wal: Wal,
    streams: Arc<StreamRegistry>,
    stream_key: u64,
    kind: u8,
    payload: Vec<u8>,
    batch: RecordBatch,
    room: usize,
    local: Option<KeyGuard>,
    cluster: Option<(Arc<ClusterKeys>, Ticket)>,
    /// MQTT QoS 2 pairs in the frame (kind 7), marked received at the append.
    qos2: Vec<Qos2Pair>,
    ledger: Arc<Qos2Ledger>,
    pause: Option<Duration>,
}

impl Write {
    /// Logs the frame and adds the batch to the memtable, waits until the frame is
    /// durable, then settles the key (the WAL index, then the cluster's claim). A frame
    /// refused by the WAL releases the claim; a WAL that fails after the append leaves it
    /// pending (the frame may be durable), for the pod's replay to settle after a restart.
    async fn run(self) -> Result<()> {
        self.sink.wait_for_room(self.room).await;
        let lsn = match self
            .sink
            .append(self.kind, self.payload, Some(self.batch))
            .await
        {
            Ok(lsn) => lsn,
            Err(e) => {
                if let Some((keys, ticket)) = self.cluster {
                    keys.settle(ticket, Settle::Release).await;
                }
                return Err(e);
            }
        };
        if !self.qos2.is_empty() {
            // At the append, before the frame can be durable: a purge never misses a pair.
            self.ledger.received(&self.qos2, lsn);
        }
        self.streams.records_logged(self.stream_key, lsn);
        self.wal.wait_durable(lsn).await?;
        if let Some(guard) = self.local {
            guard.done(lsn);
        }
        if let Some(pause) = self.pause {
            tracing::warn!(
                lsn,
                "REST insert durable; pausing {pause:?} before the answer (test hook)"
            );
            tokio::time::sleep(pause).await;
        }
        if let Some((keys, ticket)) = self.cluster {
            keys.settle(ticket, Settle::Durable).await;
        }
        Ok(())
    }
}
