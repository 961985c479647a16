//! The in-flight ledger: records accepted by `send` and not yet acked, in offset order,
//! with the cumulative-ack bookkeeping.
//!
//! One ring buffer ([`VecDeque`], its capacity reserved once for the in-flight limit)
//! holds an [`Entry`] per record: its offset (`seq`), the wire offset of the request that
//! carried it on the current connection, its payload (the caller's own `Bytes`, never
//! copied) and when it was queued. A cumulative ack `≤ w` pops entries from the front; a
//! reconnect rewinds the send cursor to the front, so everything unacked is sent again. No
//! allocation per record: the only per-record state is the entry in the ring.

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;

/// One record not yet acked.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The record's offset in the stream (what its ack future reports).
    pub seq: i64,
    /// The wire offset of the request that last carried it (valid once sent; a
    /// persistent stream's records keep it across connections, [`UNASSIGNED`] before).
    pub wire: i64,
    /// The record's bytes.
    pub payload: Bytes,
    /// When `send` accepted it (ack latency is measured from here).
    pub queued: Instant,
    /// The spool LSN just past the record's frame (0 without a spool).
    pub lsn_end: u64,
}

/// The wire offset of a record no request has carried yet.
pub const UNASSIGNED: i64 = -1;

/// What one cumulative ack released.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    /// Records popped.
    pub records: usize,
    /// Their payload bytes.
    pub bytes: usize,
    /// The highest offset popped.
    pub last_seq: Option<i64>,
    /// The highest spool LSN popped.
    pub last_lsn: u64,
}

/// The records not yet acked (see the module doc).
#[derive(Debug, Default)]
pub struct Ledger {
    entries: VecDeque<Entry>,
    bytes: usize,
    /// Entries `[0, sent)` were sent on the current connection.
    sent: usize,
}

impl Ledger {
    /// A ledger with room for `records` entries before it ever grows.
    pub fn with_capacity(records: usize) -> Self {
        Ledger {
            entries: VecDeque::with_capacity(records),
            bytes: 0,
            sent: 0,
        }
    }

    /// Records not yet acked.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether every record was acked.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Payload bytes not yet acked.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Records sent on this connection and not yet acked.
    pub fn in_flight(&self) -> usize {
        self.sent
    }

    /// Records waiting to be sent on this connection.
    pub fn unsent(&self) -> usize {
        self.entries.len() - self.sent
    }

    /// The highest offset held, if any.
    pub fn last_seq(&self) -> Option<i64> {
        self.entries.back().map(|e| e.seq)
    }

    /// The offset of the next record to send on this connection.
    pub fn next_unsent_seq(&self) -> Option<i64> {
        self.entries.get(self.sent).map(|e| e.seq)
    }

    /// Adds a record at the back (offsets must grow).
    pub fn push(&mut self, entry: Entry) {
        debug_assert!(self.last_seq().is_none_or(|s| s < entry.seq));
        self.bytes += entry.payload.len();
        self.entries.push_back(entry);
    }

    /// Takes the next unsent records for one request: up to `max_records` and (after the
    /// first) `max_bytes`, marks them sent with wire offset `wire`, and returns them.
    pub fn take_batch(
        &mut self,
        wire: i64,
        max_records: usize,
        max_bytes: usize,
    ) -> impl Iterator<Item = &Entry> {
        let start = self.sent;
        let mut end = start;
        let mut bytes = 0;
        while end < self.entries.len() && end - start < max_records.max(1) {
            let len = self.entries[end].payload.len();
            if end > start && bytes + len > max_bytes {
                break;
            }
            bytes += len;
            self.entries[end].wire = wire;
            end += 1;
        }
        self.sent = end;
        self.entries.range(start..end)
    }

    /// The wire offset already given to the next unsent record (a persistent stream's
    /// request sent on an earlier connection), if any.
    pub fn next_unsent_wire(&self) -> Option<i64> {
        self.entries
            .get(self.sent)
            .map(|e| e.wire)
            .filter(|w| *w != UNASSIGNED)
    }

    /// The highest wire offset given to a record held, if any.
    pub fn last_assigned_wire(&self) -> Option<i64> {
        self.entries
            .iter()
            .rev()
            .map(|e| e.wire)
            .find(|w| *w != UNASSIGNED)
    }

    /// How many unsent records (up to `max_records`, and within `max_bytes` after the
    /// first) one request could carry now, and whether the byte limit stopped it.
    pub fn unsent_fit(&self, max_records: usize, max_bytes: usize) -> (usize, bool) {
        let mut bytes = 0;
        let mut n = 0;
        for e in self.entries.range(self.sent..) {
            if n == max_records {
                break;
            }
            if n > 0 && bytes + e.payload.len() > max_bytes {
                return (n, true);
            }
            bytes += e.payload.len();
            n += 1;
        }
        (n, false)
    }

    /// When the oldest unsent record was queued.
    pub fn oldest_unsent(&self) -> Option<Instant> {
        self.entries.get(self.sent).map(|e| e.queued)
    }

    /// Takes the next unsent records that already carry wire offset `wire` (resent as
    /// the same request), or, when `fresh` is set, the next `fresh` records, giving them
    /// `wire`.
    pub fn take_request(
        &mut self,
        wire: i64,
        fresh: Option<usize>,
    ) -> impl Iterator<Item = &Entry> {
        let start = self.sent;
        let mut end = start;
        while end < self.entries.len() {
            let e = &mut self.entries[end];
            match fresh {
                Some(n) if end - start < n && e.wire == UNASSIGNED => e.wire = wire,
                None if e.wire == wire => {}
                _ => break,
            }
            end += 1;
        }
        self.sent = end;
        self.entries.range(start..end)
    }

    /// A cumulative ack: pops every sent record whose wire offset is `≤ wire`, calling
    /// `each` on it first.
    pub fn ack_wire(&mut self, wire: i64, each: impl FnMut(&Entry)) -> Released {
        let n = self
            .entries
            .iter()
            .take(self.sent)
            .take_while(|e| e.wire <= wire)
            .count();
        self.pop(n, each)
    }

    /// Pops every record whose offset is `≤ seq` (a persistent stream's resume watermark),
    /// sent or not.
    pub fn ack_seq(&mut self, seq: i64, each: impl FnMut(&Entry)) -> Released {
        let n = self.entries.iter().take_while(|e| e.seq <= seq).count();
        self.pop(n, each)
    }

    fn pop(&mut self, n: usize, mut each: impl FnMut(&Entry)) -> Released {
        let mut released = Released::default();
        for e in self.entries.drain(..n) {
            each(&e);
            released.records += 1;
            released.bytes += e.payload.len();
            released.last_seq = Some(e.seq);
            released.last_lsn = released.last_lsn.max(e.lsn_end);
        }
        self.bytes -= released.bytes;
        self.sent = self.sent.saturating_sub(n);
        released
    }

    /// A new connection: everything unacked is unsent again.
    pub fn rewind(&mut self) {
        self.sent = 0;
    }

    /// The offset of the `index`-th record (0 without an index) carried by the request
    /// with wire offset `wire` on this connection.
    pub fn locate(&self, wire: i64, index: usize) -> Option<i64> {
        self.entries
            .iter()
            .take(self.sent)
            .filter(|e| e.wire == wire)
            .nth(index)
            .map(|e| e.seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: i64, len: usize) -> Entry {
        Entry {
            seq,
            wire: -1,
            payload: Bytes::from(vec![b'x'; len]),
            queued: Instant::now(),
            lsn_end: seq as u64 * 10,
        }
    }

    fn ledger(n: i64) -> Ledger {
        let mut l = Ledger::with_capacity(16);
        for s in 0..n {
            l.push(entry(s, 10));
        }
        l
    }

    #[test]
    fn batches_respect_record_and_byte_limits_and_mark_wire_offsets() {
        let mut l = ledger(10);
        let seqs: Vec<i64> = l.take_batch(0, 4, 1000).map(|e| e.seq).collect();
        assert_eq!(seqs, [0, 1, 2, 3]);
        let seqs: Vec<i64> = l.take_batch(1, 100, 25).map(|e| e.seq).collect();
        assert_eq!(seqs, [4, 5], "25 bytes hold two 10-byte records");
        // A record larger than max_bytes still goes, alone.
        let seqs: Vec<i64> = l.take_batch(2, 100, 5).map(|e| e.seq).collect();
        assert_eq!(seqs, [6]);
        assert_eq!((l.in_flight(), l.unsent()), (7, 3));
        assert_eq!(l.locate(1, 1), Some(5));
        assert_eq!(l.locate(1, 2), None);
        assert_eq!(l.locate(3, 0), None, "not sent");
    }

    #[test]
    fn cumulative_acks_pop_whole_requests_and_count_bytes() {
        let mut l = ledger(10);
        let _ = l.take_batch(0, 3, usize::MAX).count();
        let _ = l.take_batch(1, 3, usize::MAX).count();
        let mut seen = Vec::new();
        let r = l.ack_wire(0, |e| seen.push(e.seq));
        assert_eq!(seen, [0, 1, 2]);
        assert_eq!(
            r,
            Released {
                records: 3,
                bytes: 30,
                last_seq: Some(2),
                last_lsn: 20
            }
        );
        assert_eq!((l.len(), l.bytes(), l.in_flight()), (7, 70, 3));
        // An ack above what was sent pops only what was sent.
        let r = l.ack_wire(99, |_| {});
        assert_eq!(r.last_seq, Some(5));
        assert_eq!((l.len(), l.in_flight(), l.unsent()), (4, 0, 4));
        // A repeated (stale) ack pops nothing.
        assert_eq!(l.ack_wire(1, |_| {}), Released::default());
    }

    #[test]
    fn rewind_resends_everything_unacked_with_new_wire_offsets() {
        let mut l = ledger(5);
        let _ = l.take_batch(0, 2, usize::MAX).count();
        let _ = l.take_batch(1, 2, usize::MAX).count();
        let _ = l.ack_wire(0, |_| {});
        l.rewind();
        assert_eq!((l.in_flight(), l.unsent()), (0, 3));
        let seqs: Vec<(i64, i64)> = l
            .take_batch(0, 10, usize::MAX)
            .map(|e| (e.seq, e.wire))
            .collect();
        assert_eq!(seqs, [(2, 0), (3, 0), (4, 0)]);
        // The old connection's wire offset 1 no longer means anything.
        assert_eq!(l.ack_wire(0, |_| {}).records, 3);
        assert!(l.is_empty());
    }

    #[test]
    fn persistent_requests_keep_their_records_across_a_rewind() {
        let mut l = Ledger::with_capacity(16);
        for s in 0..7 {
            let mut e = entry(s, 10);
            e.wire = UNASSIGNED;
            l.push(e);
        }
        assert_eq!(l.unsent_fit(3, usize::MAX), (3, false));
        assert_eq!(l.unsent_fit(100, 25), (2, true));
        assert_eq!(l.take_request(0, Some(3)).count(), 3);
        assert_eq!(l.take_request(1, Some(2)).count(), 2);
        assert_eq!(l.next_unsent_wire(), None);
        assert_eq!(l.last_assigned_wire(), Some(1));
        let _ = l.ack_wire(0, |_| {});
        l.rewind();
        assert_eq!(
            l.next_unsent_wire(),
            Some(1),
            "request 1 is resent as it was"
        );
        let again: Vec<i64> = l.take_request(1, None).map(|e| e.seq).collect();
        assert_eq!(again, [3, 4]);
        assert_eq!(l.next_unsent_wire(), None);
        assert_eq!(l.unsent(), 2);
    }

    #[test]
    fn a_resume_watermark_pops_by_offset_sent_or_not() {
        let mut l = ledger(6);
        let _ = l.take_batch(0, 2, usize::MAX).count();
        let r = l.ack_seq(3, |_| {});
        assert_eq!((r.records, r.last_seq), (4, Some(3)));
        assert_eq!((l.len(), l.in_flight(), l.unsent()), (2, 0, 2));
    }

    #[test]
    fn the_ring_does_not_grow_past_its_reserved_capacity() {
        let mut l = Ledger::with_capacity(8);
        let cap = l.entries.capacity();
        for round in 0..100i64 {
            for s in 0..8 {
                l.push(entry(round * 8 + s, 1));
            }
            let _ = l.take_batch(round, 8, usize::MAX).count();
            assert_eq!(l.ack_wire(round, |_| {}).records, 8);
        }
        assert_eq!(l.entries.capacity(), cap, "no reallocation in steady state");
    }
}
