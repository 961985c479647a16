//! Persistent streams' watermarks in Delta: every commit that holds rows of a persistent
//! stream carries one `txn` action per such stream (appId = the stream id, version = the
//! last offset the commit holds), atomically with the rows. A resume reads it back as the
//! stream's committed offset ([`read_stream_txn`]).
//!
//! The memtable keeps one [`StreamMark`] per batch of a persistent stream; a commit passes
//! them all to [`with_stream_txns`], which keeps the highest offset per stream.

use std::collections::BTreeMap;
use std::sync::Arc;

use deltalake::kernel::transaction::CommitProperties;
use deltalake::kernel::Transaction;
use deltalake::DeltaTable;

use crate::error::Result;

/// The last offset of a persistent stream held by one memtable batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamMark {
    /// The persistent stream's id (the `txn` appId).
    pub stream_id: Arc<str>,
    /// The highest offset of the stream in the batch.
    pub offset: i64,
}

/// Adds to `props` one `txn{appId: stream id, version: highest offset}` per stream in
/// `marks` (any order, repeats allowed).
pub fn with_stream_txns(props: CommitProperties, marks: &[StreamMark]) -> CommitProperties {
    let mut highest: BTreeMap<&str, i64> = BTreeMap::new();
    for mark in marks {
        let at = highest.entry(&mark.stream_id).or_insert(mark.offset);
        *at = (*at).max(mark.offset);
    }
    highest.into_iter().fold(props, |props, (id, offset)| {
        props.with_application_transaction(Transaction::new(id, offset))
    })
}

/// Reloads `table`'s log and reads the offset committed for persistent stream `stream_id`
/// (None: no commit holds any of its records).
pub async fn read_stream_txn(table: &mut DeltaTable, stream_id: &str) -> Result<Option<i64>> {
    // Afresh from the newest checkpoint when an incremental update fails (log retention may
    // have deleted commits this handle had read past).
    crate::commit::reload(table).await?;
    let version = table
        .snapshot()?
        .transaction_version(table.log_store().as_ref(), stream_id)
        .await?;
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(id: &str, offset: i64) -> StreamMark {
        StreamMark {
            stream_id: Arc::from(id),
            offset,
        }
    }

    #[test]
    fn one_txn_per_stream_at_its_highest_offset() {
        let marks = [mark("b", 4), mark("a", 9), mark("b", 7), mark("a", 2)];
        let props = with_stream_txns(CommitProperties::default(), &marks);
        let text = format!("{props:?}");
        assert!(text.contains("app_id: \"a\", version: 9"), "{text}");
        assert!(text.contains("app_id: \"b\", version: 7"), "{text}");
        assert_eq!(text.matches("app_id").count(), 2, "{text}");
    }
}
