//! A persistent stream's batch plan: which records each request carries.
//!
//! The server numbers a persistent stream's *requests* (0, 1, 2, … — its watermark is a
//! request number), while the SDK numbers *records* (`seq`, what an ack future reports and
//! what a resumed producer skips to). A request must carry the same records every time it
//! is sent — on a new connection and in a new process — or a resume would skip records or
//! write some twice. The plan makes that mapping a function kept in the state file:
//!
//! - a [`Cut`] `{wire, last_seq, batch}` says request `wire` ends at record `last_seq`,
//!   and every later request holds exactly `batch` records until the next cut;
//! - the first cut is the base: the highest acked request and its last record;
//! - a request that follows the plan needs no disk write; one that does not (a short
//!   batch because the producer paused, a byte limit, a size change) adds a cut, and the
//!   cut is saved (`fsync`) *before* the request is sent.
//!
//! So in steady state (full batches) the state file is only rewritten for the acked
//! watermark (at most every 200 ms), and a restarted process maps the server's watermark
//! back to a record with the cuts it finds there.

use serde::{Deserialize, Serialize};

/// Request `wire` ends at record `last_seq`; each request after it holds `batch` records
/// until the next cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cut {
    /// The request's wire offset.
    pub wire: i64,
    /// Its last record's offset.
    pub last_seq: i64,
    /// Records per request after it.
    pub batch: u32,
}

/// The cuts from the acked base on (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    cuts: Vec<Cut>,
}

impl Plan {
    /// A plan whose base is request `wire` ending at record `last_seq` (a new stream:
    /// `-1, -1`), then requests of `batch` records.
    pub fn new(wire: i64, last_seq: i64, batch: u32) -> Self {
        Plan {
            cuts: vec![Cut {
                wire,
                last_seq,
                batch: batch.max(1),
            }],
        }
    }

    /// A plan read back from a state file: non-empty, wire offsets and records growing,
    /// every request holding at least one record, batches ≥ 1.
    pub fn from_cuts(cuts: Vec<Cut>) -> Result<Self, String> {
        let Some(first) = cuts.first() else {
            return Err("the batch plan has no cut".into());
        };
        if first.wire < -1 || first.last_seq < -1 {
            return Err(format!("the base cut {first:?} is negative"));
        }
        for c in &cuts {
            if c.batch == 0 {
                return Err(format!("cut {c:?} has batches of 0 records"));
            }
        }
        for pair in cuts.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let least = i64::from(a.batch)
                .checked_mul(b.wire.checked_sub(a.wire + 1).unwrap_or(-1))
                .and_then(|n| n.checked_add(a.last_seq + 1));
            match least {
                Some(least) if b.wire > a.wire && b.last_seq >= least => {}
                _ => return Err(format!("cut {b:?} does not follow {a:?}")),
            }
        }
        Ok(Plan { cuts })
    }

    /// The cuts, base first (what the state file keeps).
    pub fn cuts(&self) -> &[Cut] {
        &self.cuts
    }

    /// The base: the highest request known acked.
    pub fn base(&self) -> Cut {
        self.cuts[0]
    }

    fn governing(&self, wire: i64) -> Option<Cut> {
        self.cuts.iter().rev().find(|c| c.wire <= wire).copied()
    }

    /// The last record of request `wire` (`None` below the base, or past `i64`).
    pub fn last_seq_of(&self, wire: i64) -> Option<i64> {
        let c = self.governing(wire)?;
        i64::from(c.batch)
            .checked_mul(wire - c.wire)
            .and_then(|n| n.checked_add(c.last_seq))
    }

    /// Records per request after `wire` (until a later cut).
    pub fn batch_after(&self, wire: i64) -> u32 {
        self.governing(wire).map_or(1, |c| c.batch)
    }

    /// The wire offset of the last cut (no request past it has been planned differently).
    pub fn last_cut_wire(&self) -> i64 {
        self.cuts.last().map_or(-1, |c| c.wire)
    }

    /// Adds a cut at request `wire` (past every cut) ending at `last_seq`, with `batch`
    /// records per request after it.
    pub fn cut(&mut self, wire: i64, last_seq: i64, batch: u32) {
        debug_assert!(wire > self.last_cut_wire());
        self.cuts.push(Cut {
            wire,
            last_seq,
            batch: batch.max(1),
        });
    }

    /// Request `wire` is acked: it becomes the base (cuts at or below it go).
    pub fn acked(&mut self, wire: i64) {
        if wire <= self.base().wire {
            return;
        }
        let (Some(last_seq), batch) = (self.last_seq_of(wire), self.batch_after(wire)) else {
            return;
        };
        self.cuts.retain(|c| c.wire > wire);
        self.cuts.insert(
            0,
            Cut {
                wire,
                last_seq,
                batch,
            },
        );
    }

    /// Forgets the cuts past request `wire` (requests a previous process planned but the
    /// server never made durable), and from there plans requests of `batch` records.
    pub fn forget_after(&mut self, wire: i64, batch: u32) {
        let Some(last_seq) = self.last_seq_of(wire) else {
            return;
        };
        self.cuts.retain(|c| c.wire <= wire);
        match self.cuts.last_mut() {
            Some(last) if last.wire == wire => last.batch = batch.max(1),
            _ => self.cut(wire, last_seq, batch),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_batches_follow_the_base_and_cuts_override_them() {
        let mut p = Plan::new(-1, -1, 100);
        assert_eq!(p.last_seq_of(0), Some(99));
        assert_eq!(p.last_seq_of(4), Some(499));
        assert_eq!(p.last_seq_of(-2), None, "below the base");
        // Request 5 is short (30 records), then batches of 30.
        p.cut(5, 529, 30);
        assert_eq!(p.last_seq_of(5), Some(529));
        assert_eq!(p.last_seq_of(6), Some(559));
        assert_eq!(p.last_seq_of(4), Some(499), "earlier requests unchanged");
        p.acked(6);
        assert_eq!(
            p.cuts(),
            [Cut {
                wire: 6,
                last_seq: 559,
                batch: 30
            }]
        );
        assert_eq!(p.last_seq_of(7), Some(589));
    }

    #[test]
    fn forgetting_unsent_plans_starts_new_batches_after_the_watermark() {
        let mut p = Plan::new(-1, -1, 10);
        p.cut(3, 35, 10); // request 3 had 6 records
        p.cut(6, 60, 5);
        p.forget_after(4, 50);
        assert_eq!(p.last_seq_of(4), Some(45));
        assert_eq!(p.last_seq_of(5), Some(95), "batches of 50 after request 4");
        assert_eq!(p.last_seq_of(3), Some(35));
        let mut q = Plan::new(9, 9, 1);
        q.forget_after(9, 100);
        assert_eq!(q.cuts().len(), 1);
        assert_eq!(q.last_seq_of(10), Some(109));
    }

    #[test]
    fn read_back_plans_are_checked() {
        let ok = vec![
            Cut {
                wire: 2,
                last_seq: 20,
                batch: 10,
            },
            Cut {
                wire: 4,
                last_seq: 31,
                batch: 10,
            },
        ];
        assert!(Plan::from_cuts(ok.clone()).is_ok());
        let mut empty_request = ok.clone();
        empty_request[1].last_seq = 30; // request 4 would hold no record
        assert!(Plan::from_cuts(empty_request).is_err());
        let mut backwards = ok.clone();
        backwards[1].wire = 2;
        assert!(Plan::from_cuts(backwards).is_err());
        let mut zero = ok;
        zero[0].batch = 0;
        assert!(Plan::from_cuts(zero).is_err());
        assert!(Plan::from_cuts(Vec::new()).is_err());
    }

    proptest::proptest! {
        /// Any sequence of request sizes, cut wherever a size differs from the plan, maps
        /// every request back to exactly the records it carried, also after acks.
        #[test]
        fn the_plan_maps_every_request_back_to_its_records(
            sizes in proptest::collection::vec(1u32..4, 1..60), batch in 1u32..4, acked in 0usize..60,
        ) {
            let mut p = Plan::new(-1, -1, batch);
            let mut ends = Vec::new();
            let mut next = 0i64;
            // A request needs a cut (a disk write) only when its size is not the one in force.
            let (mut in_force, mut changes) = (batch, 0usize);
            for (wire, n) in sizes.iter().enumerate() {
                let wire = wire as i64;
                let end = next + i64::from(*n) - 1;
                if p.last_seq_of(wire) != Some(end) {
                    p.cut(wire, end, *n);
                }
                if *n != in_force {
                    (in_force, changes) = (*n, changes + 1);
                }
                ends.push(end);
                next = end + 1;
            }
            proptest::prop_assert_eq!(p.cuts().len(), 1 + changes, "cuts only where the size changed");
            let acked = (acked.min(sizes.len() - 1)) as i64;
            p.acked(acked);
            let back = Plan::from_cuts(p.cuts().to_vec()).expect("valid");
            for (wire, end) in ends.iter().enumerate().skip(acked as usize) {
                proptest::prop_assert_eq!(back.last_seq_of(wire as i64), Some(*end));
            }
        }
    }
}
