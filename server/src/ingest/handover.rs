//! Moving a persistent stream between pods (cluster; a single node only ever meets its own
//! streams). Ownership is the record's `owner` in the registry, changed by compare-and-swap:
//!
//! - [`take_over`] (a resume on this pod): owner this pod → nothing to do; no owner →
//!   claim it; another owner → ask it to [`release`] (a peer call), then claim. An owner
//!   not registered or not answering may hold acked records only its WAL knows: the resume
//!   is *fenced*, refused UNAVAILABLE naming the pod, until that pod is back, has committed
//!   its replayed WAL and answers (the SDKs retry).
//! - [`release`] (the owner's side, and a drain's [`release_all`]): end the connection
//!   holding the stream, commit the table until the Delta log's `txn(stream id)` reaches
//!   this pod's WAL mark of the stream, clear the owner, answer the watermark.

use std::time::Duration;

use super::open::table_sink;
use crate::error::{Result, ServerError};
use crate::pod::Pod;
use crate::pstreams::{Ending, Released};
use crate::sink::SharedSink;

/// How often a take-over re-reads the record before giving up (other pods racing for it).
const TAKE_OVER_ROUNDS: usize = 8;
/// How long a release may try to commit the stream's rows before answering UNAVAILABLE.
const COMMIT_DEADLINE: Duration = Duration::from_secs(20);
/// Pause between commit attempts of a release.
const COMMIT_RETRY: Duration = Duration::from_millis(50);

/// Makes this pod the owner of stream `id`, asking its owner to release it first when
/// another pod holds it. Returns the watermark the owner answered (None: no release, or
/// nothing of the stream durable). A retired stream is left as it is (the caller refuses).
pub async fn take_over(pod: &Pod, id: &str) -> Result<Option<i64>> {
    let me = pod.pod_id();
    let mut answered = None;
    for _ in 0..TAKE_OVER_ROUNDS {
        let stored = pod.pstreams.get(id).await?;
        let owner = stored.record.owner.clone();
        if owner == me || stored.record.retired {
            return Ok(answered);
        }
        if owner.is_empty() {
            let mut record = stored.record;
            record.owner = me.to_string();
            if pod.pstreams.replace(stored.revision, record).await? {
                tracing::info!(stream_id = %id, "took ownership of a released persistent stream");
                return Ok(answered);
            }
            continue;
        }
        let Some(peers) = pod.pstreams.peers() else {
            return Err(held_by(id, &owner, me, "connect to that pod"));
        };
        match peers.release(&owner, id).await {
            Ok(released) => answered = answered.max(released.watermark),
            Err(why) => {
                return Err(held_by(
                    id,
                    &owner,
                    me,
                    &format!(
                        "it is fenced until that pod is back and has committed its WAL \
                         ({why}); retry"
                    ),
                ))
            }
        }
    }
    Err(ServerError::Unavailable(format!(
        "persistent stream `{id}` is being moved by other pods at once; retry"
    )))
}

fn held_by(id: &str, owner: &str, me: &str, what: &str) -> ServerError {
    ServerError::Unavailable(format!(
        "persistent stream `{id}` is held by pod `{owner}`, not this pod `{me}`; {what}"
    ))
}

/// Lets stream `id` go from this pod: ends its connection here (a retired stream's
/// connection with FAILED_PRECONDITION, else ABORTED), commits its rows until the Delta log
/// covers this pod's WAL mark of it, clears the owner and answers the watermark. A stream
/// this pod does not own is answered at once with the log's watermark (`released` false).
pub async fn release(pod: &Pod, id: &str) -> Result<Released> {
    let stored = pod.pstreams.get(id).await?;
    let sink = table_sink(pod, &stored.record.table).await?;
    if stored.record.owner != pod.pod_id() {
        return Ok(Released {
            watermark: sink.stream_txn(id).await?,
            released: false,
        });
    }
    let why = if stored.record.retired {
        Ending::Retired
    } else {
        Ending::Resumed
    };
    let _held = pod.pstreams.attach_ending(id, why).await?;
    let watermark = commit_through_wal_mark(pod, &sink, id).await?;
    for _ in 0..TAKE_OVER_ROUNDS {
        let stored = pod.pstreams.get(id).await?;
        if stored.record.owner != pod.pod_id() {
            break;
        }
        let mut record = stored.record;
        record.owner.clear();
        if pod.pstreams.replace(stored.revision, record).await? {
            break;
        }
    }
    tracing::info!(stream_id = %id, ?watermark, "persistent stream released");
    Ok(Released {
        watermark,
        released: true,
    })
}

/// Commits `sink` until the Delta log's `txn(id)` reaches this pod's WAL mark of stream
/// `id`; returns the watermark (the higher of the two).
async fn commit_through_wal_mark(pod: &Pod, sink: &SharedSink, id: &str) -> Result<Option<i64>> {
    let mark = pod.pstreams.wal_mark(id);
    if let Some((_, lsn)) = mark {
        pod.wal.wait_durable(lsn).await?;
    }
    let wal = mark.map(|(offset, _)| offset);
    let deadline = tokio::time::Instant::now() + COMMIT_DEADLINE;
    loop {
        let flushed = sink.flush().await;
        let delta = sink.stream_txn(id).await;
        match (flushed, delta) {
            (Ok(_), Ok(delta)) if delta >= wal => return Ok(delta.max(wal)),
            (Err(e), _) | (_, Err(e)) if tokio::time::Instant::now() >= deadline => {
                return Err(ServerError::Unavailable(format!(
                    "persistent stream `{id}`: its rows could not be committed yet ({e}); retry"
                )))
            }
            _ if tokio::time::Instant::now() >= deadline => {
                return Err(ServerError::Unavailable(format!(
                    "persistent stream `{id}`: its rows up to offset {wal:?} are not committed \
                     yet; retry"
                )))
            }
            _ => tokio::time::sleep(COMMIT_RETRY).await,
        }
    }
}

/// Releases every stream this pod owns (a drain, before the pod exits): resumes elsewhere
/// proceed at once instead of being fenced. Failures are logged; the stream stays owned
/// (and fenced until this pod is back).
pub async fn release_all(pod: &Pod) {
    let owned = match pod.pstreams.owned().await {
        Ok(owned) => owned,
        Err(e) => {
            tracing::warn!("listing this pod's persistent streams failed: {e}");
            return;
        }
    };
    let mut released = 0usize;
    for stored in owned {
        match release(pod, &stored.record.id).await {
            Ok(_) => released += 1,
            Err(e) => tracing::warn!(stream_id = %stored.record.id, "release failed: {e}"),
        }
    }
    tracing::info!(released, "released this pod's persistent streams");
}
