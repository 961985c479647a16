//! The covered-check: what the log already holds of each pod WAL (its `txn`
//! version) and, from that, which pending hand-offs are covered (answered
//! without a commit), which are to be committed, and which are refused
//! because they leave a gap or overlap what is held.

use std::collections::HashMap;

use deltalake::DeltaTable;
use sluice_wal::Lsn;

use super::handoff::{HandOff, HandOffError};
use crate::error::{Result, ServerError};

/// What to do with one pending hand-off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The log holds it already.
    Covered,
    /// Commit it.
    Commit,
    /// Never commit it.
    Refuse(HandOffError),
}

/// The `txn` version of `app_id` in the loaded log, as a non-negative
/// number (None: the app id never committed).
pub(crate) async fn txn_of(table: &DeltaTable, app_id: &str) -> Result<Option<u64>> {
    let version = table
        .snapshot()?
        .transaction_version(table.log_store().as_ref(), app_id)
        .await?;
    Ok(version.map(|v| v.max(0) as u64))
}

/// A WAL position or epoch as a Delta `txn` version.
pub(crate) fn txn_version(v: u64) -> Result<i64> {
    i64::try_from(v).map_err(|_| ServerError::Internal(format!("txn version {v} exceeds i64")))
}

/// How far the loaded log holds each WAL of `handoffs` (0: not at all).
pub(crate) async fn wal_marks(
    table: &DeltaTable,
    handoffs: &[&HandOff],
) -> Result<HashMap<String, Lsn>> {
    let mut marks = HashMap::new();
    for h in handoffs {
        if !marks.contains_key(&h.wal_id) {
            let held = txn_of(table, &h.wal_id).await?.unwrap_or(0);
            marks.insert(h.wal_id.clone(), held);
        }
    }
    Ok(marks)
}

/// Judges `handoffs` (any order) against what the log holds (`marks`, from
/// [`wal_marks`]). Per WAL the hand-offs still to commit must chain on from
/// the log's mark: each starts exactly where the previous one (or the log)
/// ends. One that starts later leaves a gap, one that starts earlier
/// overlaps; both are refused and the chain continues without them.
pub(crate) fn judge(
    table: &str,
    handoffs: &[&HandOff],
    marks: &HashMap<String, Lsn>,
) -> Vec<Verdict> {
    let mut order: Vec<usize> = (0..handoffs.len()).collect();
    order.sort_by_key(|&i| {
        (
            &handoffs[i].wal_id,
            handoffs[i].from_lsn,
            handoffs[i].to_lsn,
        )
    });
    let mut verdicts = vec![Verdict::Commit; handoffs.len()];
    let mut chain: HashMap<&str, Lsn> = HashMap::new();
    for i in order {
        let h = handoffs[i];
        let held = marks.get(&h.wal_id).copied().unwrap_or(0);
        let end = chain.entry(h.wal_id.as_str()).or_insert(held);
        verdicts[i] = if h.to_lsn <= held {
            Verdict::Covered
        } else if h.from_lsn > *end {
            Verdict::Refuse(HandOffError::Gap {
                table: table.to_string(),
                wal_id: h.wal_id.clone(),
                from_lsn: h.from_lsn,
                committed: *end,
            })
        } else if h.from_lsn < *end {
            Verdict::Refuse(HandOffError::Overlap {
                table: table.to_string(),
                wal_id: h.wal_id.clone(),
                from_lsn: h.from_lsn,
                to_lsn: h.to_lsn,
                committed: *end,
            })
        } else {
            *end = h.to_lsn;
            Verdict::Commit
        };
    }
    verdicts
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::{judge, Verdict};
    use crate::commit::HandOff;

    fn handoff(wal: &str, from: u64, to: u64) -> HandOff {
        HandOff {
            table: "t".into(),
            pod_id: "p".into(),
            wal_id: wal.into(),
            from_lsn: from,
            to_lsn: to,
            adds: Vec::new(),
            streams: Vec::new(),
            schema_id: String::new(),
        }
    }

    #[test]
    fn hand_offs_chain_on_from_the_log_per_wal() {
        let hs = [
            handoff("a", 20, 30),
            handoff("a", 0, 10),
            handoff("a", 10, 20),
            handoff("b", 0, 5),
            handoff("c", 50, 60),
        ];
        let refs: Vec<&HandOff> = hs.iter().collect();
        let marks = HashMap::from([("a".to_string(), 10), ("c".to_string(), 40)]);
        let v = judge("t", &refs, &marks);
        assert_eq!(v[0], Verdict::Commit);
        assert_eq!(v[1], Verdict::Covered);
        assert_eq!(v[2], Verdict::Commit);
        assert_eq!(v[3], Verdict::Commit);
        assert!(matches!(
            v[4],
            Verdict::Refuse(crate::commit::HandOffError::Gap { committed: 40, .. })
        ));
    }

    #[test]
    fn a_partly_committed_or_doubled_range_is_refused() {
        let hs = [
            handoff("a", 5, 15),
            handoff("a", 10, 20),
            handoff("a", 10, 25),
        ];
        let refs: Vec<&HandOff> = hs.iter().collect();
        let marks = HashMap::from([("a".to_string(), 10)]);
        let v = judge("t", &refs, &marks);
        assert!(matches!(
            v[0],
            Verdict::Refuse(crate::commit::HandOffError::Overlap { .. })
        ));
        assert_eq!(v[1], Verdict::Commit);
        assert!(matches!(
            v[2],
            Verdict::Refuse(crate::commit::HandOffError::Overlap { .. })
        ));
    }
}
