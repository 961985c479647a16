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

/// Completes or forgets a pending alter of `entry` as its Delta log says;
/// returns the entry as it is now.
pub async fn settle(
    catalog: &Catalog,
    warehouse: &Warehouse,
    entry: TableEntry,
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
        tracing::warn!(table = %entry.full_name, version, "an alter cut short after its Delta commit: completed in the catalog");
        return catalog.finish_alter(&entry.full_name, version);
    }
    if have == delta_columns(&entry.schema()?, added)? {
        tracing::warn!(table = %entry.full_name, "an alter cut short before its Delta commit: forgotten");
        return catalog.abort_alter(&entry.full_name);
    }
    Err(ServerError::Internal(format!(
        "table {}: its Delta schema is neither the catalog's columns nor those of the pending alter",
        entry.full_name
    )))
}
