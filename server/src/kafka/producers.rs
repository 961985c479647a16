//! Idempotent producers: producer ids, epochs and per-partition sequences, so a batch a
//! client retries (after a timeout, a lost connection or a pod crash) is written once.
//!
//! The state is a persistent stream's watermark (ARCHITECTURE.md, "Persistent streams"):
//! producer `p` writing table `t` is the persistent stream `kafka-producer-<p>@<t>`, whose
//! records carry the offset `epoch << 32 | sequence`. Its watermark — the last (epoch,
//! sequence) written — is max(the Delta log's `txn` of that id, the highest offset of its
//! frames in this pod's WAL), both already kept by the persistent-stream machinery: the
//! commit adds the `txn` atomically with the rows, replay reports the WAL's marks. So a
//! SIGKILLed pod knows after its replay exactly which batches it made durable.
//!
//! Producer ids are random in [1, 2^62): no counter to persist, and a collision with a
//! live producer's id is as likely as guessing it. An epoch bump (InitProducerId with the
//! current id and epoch, KIP-360) fences older epochs in this process; the new epoch
//! becomes durable with its first batch. Sequence wrap-around past 2^31 - 1 is refused
//! (OUT_OF_ORDER_SEQUENCE_NUMBER), not followed.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use sluice_wal::Lsn;

use crate::error::{Result, ServerError};

/// The last batch written: its producer epoch and last sequence.
pub type Watermark = (i16, i32);

/// The persistent stream id of producer `pid` writing `table`.
pub fn stream_id(pid: i64, table: &str) -> String {
    format!("kafka-producer-{pid}@{table}")
}

/// The stream offset of sequence `seq` under `epoch`.
pub fn offset(epoch: i16, seq: i32) -> i64 {
    (i64::from(epoch) << 32) | i64::from(seq as u32)
}

/// The (epoch, sequence) an offset stands for.
pub fn watermark(offset: i64) -> Watermark {
    ((offset >> 32) as i16, (offset & 0xffff_ffff) as u32 as i32)
}

/// What to do with a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The next batch: write it.
    Write,
    /// Written before: answer success, write nothing.
    Duplicate,
    /// A gap or overlap (OUT_OF_ORDER_SEQUENCE_NUMBER).
    OutOfOrder(String),
    /// An older epoch than one already seen (INVALID_PRODUCER_EPOCH).
    Fenced(String),
}

/// Judges a batch of `count` records from `base_seq` under `epoch`, after `last`.
pub fn judge(last: Option<Watermark>, epoch: i16, base_seq: i32, count: usize) -> Verdict {
    let end = i64::from(base_seq) + count as i64 - 1;
    if base_seq < 0 || count == 0 || end > i64::from(i32::MAX) {
        return Verdict::OutOfOrder(format!(
            "batch sequences {base_seq}..={end}: sequences start at 0 and do not wrap here"
        ));
    }
    let Some((last_epoch, last_seq)) = last else {
        return if base_seq == 0 {
            Verdict::Write
        } else {
            Verdict::OutOfOrder(format!(
                "no batch of this producer was written to this table; expected sequence 0, \
                 got {base_seq}"
            ))
        };
    };
    if epoch < last_epoch {
        return Verdict::Fenced(format!(
            "producer epoch {epoch} is older than epoch {last_epoch} already written"
        ));
    }
    if epoch > last_epoch {
        return if base_seq == 0 {
            Verdict::Write
        } else {
            Verdict::OutOfOrder(format!(
                "a new epoch {epoch} starts at sequence 0, got {base_seq}"
            ))
        };
    }
    let next = i64::from(last_seq) + 1;
    if i64::from(base_seq) == next {
        Verdict::Write
    } else if end <= i64::from(last_seq) {
        Verdict::Duplicate
    } else {
        Verdict::OutOfOrder(format!(
            "expected sequence {next} for epoch {epoch}, got {base_seq}..={end}"
        ))
    }
}

/// One producer's state on one table, held while a batch of it is judged and logged.
#[derive(Debug, Default)]
pub struct Slot {
    /// Whether `last` was read (from the WAL marks and the Delta log) with this pod owning
    /// the producer's stream (`super::producer_stream`).
    pub loaded: bool,
    /// The stream's generation when `last` was read: a higher one means the stream was
    /// released to another pod since, and `last` must be read again.
    pub generation: u64,
    /// The last batch written.
    pub last: Option<Watermark>,
    /// End LSN of the frame of the last batch written by this process (0: none): a
    /// duplicate is answered once that frame is durable.
    pub last_lsn: Lsn,
    /// The WAL key of this producer's stream in this process (None: not opened yet).
    pub stream_key: Option<u64>,
}

/// A slot, shared by the connections of one producer.
pub type SharedSlot = Arc<tokio::sync::Mutex<Slot>>;

/// The producers this pod knows.
#[derive(Default)]
pub struct Producers {
    slots: Mutex<HashMap<(i64, String), SharedSlot>>,
    /// Ids handed out by this process (no history anywhere) and their current epoch.
    epochs: Mutex<HashMap<i64, i16>>,
    fresh: Mutex<HashSet<i64>>,
}

impl Producers {
    fn poisoned() -> ServerError {
        ServerError::Internal("Kafka producer state poisoned".into())
    }

    /// A new producer id, epoch 0.
    pub fn allocate(&self) -> Result<(i64, i16)> {
        let mut epochs = self.epochs.lock().map_err(|_| Self::poisoned())?;
        let id = loop {
            let id = (rand::random::<u64>() >> 2) as i64;
            if id > 0 && !epochs.contains_key(&id) {
                break id;
            }
        };
        epochs.insert(id, 0);
        self.fresh.lock().map_err(|_| Self::poisoned())?.insert(id);
        Ok((id, 0))
    }

    /// The next epoch of producer `id` at `epoch` (KIP-360); a new id when the epoch would
    /// pass its maximum.
    pub fn bump(&self, id: i64, epoch: i16) -> Result<(i64, i16)> {
        if epoch >= i16::MAX - 1 {
            return self.allocate();
        }
        let mut epochs = self.epochs.lock().map_err(|_| Self::poisoned())?;
        let current = epochs.entry(id).or_insert(epoch);
        let next = (*current).max(epoch) + 1;
        *current = next;
        Ok((id, next))
    }

    /// The newest epoch handed out for `id` by this process (None: none).
    pub fn current_epoch(&self, id: i64) -> Result<Option<i16>> {
        Ok(self
            .epochs
            .lock()
            .map_err(|_| Self::poisoned())?
            .get(&id)
            .copied())
    }

    /// Whether `id` was allocated by this process (so it has no history to load).
    pub fn is_fresh(&self, id: i64) -> Result<bool> {
        Ok(self
            .fresh
            .lock()
            .map_err(|_| Self::poisoned())?
            .contains(&id))
    }

    /// The slot of producer `id` on `table`.
    pub fn slot(&self, id: i64, table: &str) -> Result<SharedSlot> {
        Ok(self
            .slots
            .lock()
            .map_err(|_| Self::poisoned())?
            .entry((id, table.to_string()))
            .or_default()
            .clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_next_batch_is_written_a_retry_is_a_duplicate_a_gap_is_out_of_order() {
        assert_eq!(judge(None, 0, 0, 5), Verdict::Write);
        assert!(matches!(judge(None, 0, 5, 5), Verdict::OutOfOrder(_)));
        let last = Some((0, 4));
        assert_eq!(judge(last, 0, 5, 3), Verdict::Write);
        assert_eq!(judge(last, 0, 0, 5), Verdict::Duplicate);
        assert_eq!(judge(last, 0, 3, 2), Verdict::Duplicate);
        assert!(matches!(judge(last, 0, 6, 1), Verdict::OutOfOrder(_)));
        assert!(matches!(judge(last, 0, 3, 5), Verdict::OutOfOrder(_)));
        assert_eq!(judge(last, 1, 0, 1), Verdict::Write);
        assert!(matches!(judge(last, 1, 5, 1), Verdict::OutOfOrder(_)));
        assert!(matches!(judge(Some((2, 0)), 1, 1, 1), Verdict::Fenced(_)));
        assert!(matches!(judge(None, 0, -1, 1), Verdict::OutOfOrder(_)));
        assert!(matches!(
            judge(Some((0, i32::MAX - 1)), 0, i32::MAX, 2),
            Verdict::OutOfOrder(_)
        ));
    }

    proptest! {
        #[test]
        fn offsets_order_like_epoch_then_sequence(
            a in (0i16..i16::MAX, 0i32..i32::MAX),
            b in (0i16..i16::MAX, 0i32..i32::MAX),
        ) {
            prop_assert_eq!(watermark(offset(a.0, a.1)), a);
            prop_assert_eq!(offset(a.0, a.1).cmp(&offset(b.0, b.1)), a.cmp(&b));
        }
    }

    #[test]
    fn ids_are_positive_and_bumps_fence_in_process() {
        let producers = Producers::default();
        let (id, epoch) = producers.allocate().expect("id");
        assert!(id > 0);
        assert_eq!(epoch, 0);
        assert!(producers.is_fresh(id).expect("fresh"));
        assert_eq!(producers.bump(id, 0).expect("bump"), (id, 1));
        assert_eq!(producers.current_epoch(id).expect("epoch"), Some(1));
        let (other, _) = producers.bump(id, i16::MAX - 1).expect("new id");
        assert_ne!(other, id);
    }
}
