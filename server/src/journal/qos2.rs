//! The MQTT QoS 2 publishes this pod's WAL holds as received and not released: each
//! (client id, packet id) pair with the end LSN of the newest frame that says so.
//!
//! - Received: a gathered MQTT write that holds QoS 2 publishes is logged as one kind-7
//!   frame (`frames::encode_mqtt_records`), so its pairs are durable in the same fsync as
//!   its records; the write marks them here as soon as the frame is appended
//!   ([`Qos2Ledger::received`]), before it can be durable, so a purge never misses one.
//! - Released: a PUBREL appends a kind-8 "released" frame and waits until it is durable
//!   before PUBCOMP ([`Qos2Ledger::release`]).
//! - Purge: the pairs whose newest frame lies at or below the purge point are logged again
//!   as one kind-8 "received" frame ([`Qos2Ledger::relog_below`]), as the REST
//!   idempotency keys are. The append of a release and the snapshot + append of a
//!   re-log happen under one lock, so a re-log never brings back a pair released before it.
//! - Start: replay folds the frames, in log order, into the pairs still received
//!   ([`crate::journal::ReplayReport::mqtt_received`]); the MQTT listener starts with a
//!   session per client id holding them.
//!
//! A session discarded (clean start, expiry, or expiry 0 at its connection's end) has its
//! pairs released the same way, durably, before the CONNACK or the close: a client that
//! starts clean reuses packet ids, and a stale pair brought back by a restart would answer
//! its new PUBLISH without writing it.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use sluice_wal::{Lsn, Wal};

use super::frames::{encode_mqtt_ids, Qos2Pair, Qos2State, KIND_MQTT_IDS};
use crate::error::Result;

/// The pod's received-and-not-released QoS 2 pairs.
#[derive(Default)]
pub struct Qos2Ledger {
    pairs: Mutex<HashMap<Qos2Pair, Lsn>>,
}

impl Qos2Ledger {
    /// Adds the pairs replay rebuilt.
    pub fn restore(&self, pairs: HashMap<Qos2Pair, Lsn>) {
        self.lock().extend(pairs);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Qos2Pair, Lsn>> {
        // Plain data: a panic while holding the lock leaves nothing half-done worth refusing.
        self.pairs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `pairs` were appended in the frame ending at `lsn`.
    pub fn received(&self, pairs: &[Qos2Pair], lsn: Lsn) {
        let mut map = self.lock();
        for pair in pairs {
            map.insert(pair.clone(), lsn);
        }
    }

    /// PUBREL of these pairs, or their sessions discarded: logs the release (one kind-8
    /// frame) and returns once it is durable.
    pub async fn release(&self, wal: &Wal, pairs: &[Qos2Pair]) -> Result<()> {
        if pairs.is_empty() {
            return Ok(());
        }
        let payload = encode_mqtt_ids(Qos2State::Released, pairs);
        let reservation = wal.reserve(payload.len()).await?;
        let lsn = {
            let mut map = self.lock();
            let lsn = wal.append(reservation, KIND_MQTT_IDS, payload)?;
            for pair in pairs {
                map.remove(pair);
            }
            lsn
        };
        wal.wait_durable(lsn).await?;
        Ok(())
    }

    /// The pairs of these client ids.
    pub fn of_clients(&self, clients: &[String]) -> Vec<Qos2Pair> {
        if clients.is_empty() {
            return Vec::new();
        }
        self.lock()
            .keys()
            .filter(|(c, _)| clients.contains(c))
            .cloned()
            .collect()
    }

    /// Logs again (one kind-8 "received" frame) every pair whose newest frame ends at or
    /// below `point`, so the purge of the segments below `point` keeps it.
    pub async fn relog_below(&self, wal: &Wal, point: Lsn) -> Result<Option<Lsn>> {
        let size: usize = {
            let map = self.lock();
            map.iter()
                .filter(|(_, lsn)| **lsn <= point)
                .map(|((c, _), _)| 4 + c.len())
                .sum()
        };
        if size == 0 {
            return Ok(None);
        }
        // Room for the pairs seen now; a pair released meanwhile only makes it smaller.
        let reservation = wal.reserve(5 + size).await?;
        let mut map = self.lock();
        let pairs: Vec<Qos2Pair> = map
            .iter()
            .filter(|(_, lsn)| **lsn <= point)
            .map(|(pair, _)| pair.clone())
            .collect();
        if pairs.is_empty() {
            return Ok(None);
        }
        let lsn = wal.append(
            reservation,
            KIND_MQTT_IDS,
            encode_mqtt_ids(Qos2State::Received, &pairs),
        )?;
        for pair in pairs {
            map.insert(pair, lsn);
        }
        Ok(Some(lsn))
    }

    /// The pairs by client id (the sessions the MQTT listener starts with).
    pub fn by_client(&self) -> HashMap<String, Vec<u16>> {
        let mut out: HashMap<String, Vec<u16>> = HashMap::new();
        for (client, id) in self.lock().keys() {
            out.entry(client.clone()).or_default().push(*id);
        }
        out
    }

    /// Pairs kept.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::frames::{decode_mqtt_ids, encode_mqtt_records, KIND_MQTT_RECORDS};
    use crate::journal::testwal;

    /// What a WAL says after: pairs 1 and 2 logged with their records, 1 released, the
    /// first segment purged (after a re-log when `relog`). Folded like replay.
    async fn received_after_purge(relog: bool) -> Vec<Qos2Pair> {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = testwal::small(dir.path());
        let ledger = Qos2Ledger::default();
        let pairs = vec![("dev".to_string(), 1), ("dev".to_string(), 2)];
        let payload = encode_mqtt_records(&pairs, &[0u8; 12]);
        let r = wal.reserve(payload.len()).await.expect("reserve");
        let lsn = wal.append(r, KIND_MQTT_RECORDS, payload).expect("append");
        ledger.received(&pairs, lsn);
        ledger
            .release(&wal, &pairs[..1])
            .await
            .expect("release durable");
        let last = testwal::fill_past_first_segment(&wal).await;
        if relog {
            let relogged = ledger.relog_below(&wal, last).await.expect("relog");
            wal.wait_durable(relogged.expect("a pair relogged"))
                .await
                .expect("durable");
        }
        assert!(wal.purge_below(last).expect("purge") > 0, "segments purged");
        let mut received = Vec::new();
        for frame in wal.read_from(0).expect("read") {
            let frame = frame.expect("frame");
            if frame.kind == KIND_MQTT_IDS {
                let (state, pairs) = decode_mqtt_ids(&frame.payload).expect("ids");
                match state {
                    Qos2State::Received => received.extend(pairs),
                    Qos2State::Released => received.retain(|p| !pairs.contains(p)),
                }
            }
        }
        received
    }

    #[tokio::test]
    async fn a_received_pair_outlives_the_purge_and_a_released_one_does_not() {
        assert_eq!(
            received_after_purge(true).await,
            vec![("dev".to_string(), 2)]
        );
        assert!(
            received_after_purge(false).await.is_empty(),
            "control: without the re-log the pair is gone"
        );
    }
}
