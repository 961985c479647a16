//! Schema evolution (`sluice table alter`): the rules a change is checked
//! against (`plan`), its one Delta metadata commit (`delta`), and settling an
//! alter a crash cut short between that commit and the catalog update.
//!
//! An alter is recorded in the catalog first (the entry's `pending_columns`),
//! then committed to Delta, then completed in the catalog. [`settle`] runs
//! before a table's sink opens (pod start, a pod opening a table altered
//! elsewhere, the next alter): the Delta log says whether the commit landed,
//! so the catalog ends with exactly the schema the Delta table has.

pub mod delta;
pub mod plan;
pub mod rewrite;

pub use plan::{plan, Alter, Plan, AUTO_EVOLVE, WRITER_LIMIT};

use crate::catalog::{Catalog, TableEntry};
use crate::error::{Result, ServerError};
use crate::sink::delta_columns;
use crate::warehouse::Warehouse;

/// A pending alter of another pod is treated as under way for this long; after it, a pod
/// that finds the Delta log without its commit forgets it (its pod is taken to be gone).
pub const ALTER_ABANDONED_AFTER: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// Completes or forgets a pending alter of `entry` as its Delta log says; returns the entry
/// as it is now. `me` is the calling pod, which holds its DDL lock, so none of its own
/// alters is under way: its own pending alter (or one of a catalog that did not record the
/// owner) was cut short. Another pod's may still be under way: it is completed when its
/// Delta commit is there, and otherwise left pending (the entry's `columns` stay the
/// table's) until [`ALTER_ABANDONED_AFTER`] has passed.
pub async fn settle(
    catalog: &Catalog,
    warehouse: &Warehouse,
    entry: TableEntry,
    me: &str,
) -> Result<TableEntry> {
    let Some(pending) = entry.pending_columns.clone() else {
        return Ok(entry);
    };
    let url = url::Url::parse(&entry.storage_location)
        .map_err(|e| ServerError::Internal(format!("bad location of {}: {e}", entry.full_name)))?;
    let mut table = warehouse.open(&url).await?;
    crate::commit::reload(&mut table).await?;
    let have = delta::delta_schema(&table)?;
    let added = entry.added_columns();
    let next = sluice_zeroparser::TableSchema::parse(&pending).map_err(|e| {
        ServerError::Internal(format!("pending columns of {}: {e}", entry.full_name))
    })?;
    if have == delta_columns(&next, added)? {
        let version = table.version().unwrap_or(0) as i64;
        tracing::warn!(table = %entry.full_name, version, owner = ?entry.pending_owner, "a pending alter's Delta commit is in the log: completed in the catalog");
        return catalog.finish_alter(&entry.full_name, &entry.columns, &pending, version);
    }
    if let Some(owner) = under_way_elsewhere(&entry, me) {
        tracing::info!(table = %entry.full_name, owner, "an alter by another pod is pending: left to it");
        return Ok(entry);
    }
    if have == delta_columns(&entry.schema()?, added)? {
        tracing::warn!(table = %entry.full_name, owner = ?entry.pending_owner, "an alter cut short before its Delta commit: forgotten");
        return catalog.abort_alter(&entry.full_name);
    }
    Err(ServerError::Internal(format!(
        "table {}: its Delta schema is neither the catalog's columns nor those of the pending alter",
        entry.full_name
    )))
}

/// The owner of `entry`'s pending alter when it is another pod's and recent enough to be
/// under way.
pub(crate) fn under_way_elsewhere<'a>(entry: &'a TableEntry, me: &str) -> Option<&'a str> {
    let owner = entry.pending_owner.as_deref()?;
    let since = entry.pending_since_ms.unwrap_or(0);
    let age = crate::catalog::now_millis().saturating_sub(since);
    let recent = u128::try_from(age).unwrap_or(0) < ALTER_ABANDONED_AFTER.as_millis();
    (owner != me && recent).then_some(owner)
}
