//! An idempotent producer's persistent stream across pods. Producer `p` writing table `t`
//! is the persistent stream `kafka-producer-p@t` ([`super::producers::stream_id`]); in a
//! cluster its Kafka connection may land on any pod (the router places each TCP
//! connection), so it moves between pods the way a resumed gRPC persistent stream does
//! (`ingest::handover`, ARCHITECTURE.md "Persistent streams"):
//!
//! - the stream has a registry record (created by the first pod it writes on, owner that
//!   pod, record type JSON);
//! - before a pod judges the producer's batches it takes the stream over: owner this pod →
//!   nothing to do; released → claim; another owner → that pod releases it (commits its
//!   WAL's rows of the stream, answers the watermark) — or, when it is not registered or not
//!   answering, the batch is refused UNAVAILABLE (answered KAFKA_STORAGE_ERROR, which Kafka
//!   clients retry) until that pod is back and has committed its replayed WAL;
//! - the watermark is then max(Delta's `txn`, this pod's WAL mark, the released one);
//! - each batch is judged and logged under the stream's hold, at the generation the
//!   watermark was loaded at: a release (or a resume) moves the generation, so the next
//!   batch on this pod takes the stream over again instead of trusting a stale watermark.

use tokio::sync::OwnedMutexGuard;

use super::producers::{self, Slot, Watermark};
use crate::error::{Result, ServerError};
use crate::ingest::handover::take_over;
use crate::pod::Pod;
use crate::pstreams::{PersistentStreamRecord, StreamRecordType};
use crate::sink::SharedSink;

/// How many times a batch re-takes a stream that moved while it waited for the hold.
const ROUNDS: usize = 4;

/// Makes this pod the owner of producer stream `id` on `sink`'s table with `slot`'s
/// watermark current, and returns the stream's hold for one batch. `fresh`: the producer
/// id was allocated by this process (no history anywhere when the stream has no record).
pub async fn own(
    pod: &Pod,
    sink: &SharedSink,
    id: &str,
    fresh: bool,
    slot: &mut Slot,
) -> Result<OwnedMutexGuard<()>> {
    for _ in 0..ROUNDS {
        if !slot.loaded {
            let generation = pod.pstreams.generation(id)?;
            slot.last = load(pod, sink, id, fresh).await?;
            slot.generation = generation;
            slot.loaded = true;
        }
        let (held, generation) = pod.pstreams.hold(id).await?;
        if generation == slot.generation {
            return Ok(held);
        }
        slot.loaded = false;
    }
    Err(ServerError::Unavailable(format!(
        "Kafka producer stream `{id}` keeps moving between pods; retry"
    )))
}

/// Registers or takes over stream `id` and reads its watermark.
async fn load(pod: &Pod, sink: &SharedSink, id: &str, fresh: bool) -> Result<Option<Watermark>> {
    let created = match pod.pstreams.get(id).await {
        Ok(_) => false,
        Err(ServerError::NotFound(_)) => pod.pstreams.replace(0, record(pod, sink, id)).await?,
        Err(e) => return Err(e),
    };
    if created && fresh {
        return Ok(None);
    }
    let released = if created {
        None
    } else {
        take_over(pod, id).await?
    };
    let stored = pod.pstreams.get(id).await?;
    if stored.record.owner != pod.pod_id() {
        return Err(ServerError::Unavailable(format!(
            "Kafka producer stream `{id}` moved to pod `{}` meanwhile; retry",
            stored.record.owner
        )));
    }
    Ok(watermark(pod, sink, id)
        .await?
        .max(released)
        .map(producers::watermark))
}

fn record(pod: &Pod, sink: &SharedSink, id: &str) -> PersistentStreamRecord {
    PersistentStreamRecord {
        id: id.to_string(),
        table: sink.name().to_string(),
        record_type: StreamRecordType::Json,
        descriptor: Vec::new(),
        owner: pod.pod_id().to_string(),
        retired: false,
        created_at: chrono::Utc::now().to_rfc3339(),
    }
}

/// The highest offset of persistent stream `id` written: max(the Delta log's `txn`, this
/// pod's WAL mark once durable).
async fn watermark(pod: &Pod, sink: &SharedSink, id: &str) -> Result<Option<i64>> {
    let delta = sink.stream_txn(id).await?;
    let wal = match pod.pstreams.wal_mark(id) {
        Some((offset, lsn)) => {
            pod.wal.wait_durable(lsn).await?;
            Some(offset)
        }
        None => None,
    };
    Ok(delta.max(wal))
}
