//! Creating a table: its Delta table under the warehouse (or, for an
//! explicit `storage_location` where a Delta table with the same columns
//! exists, that one: another pod writes it too, and the Delta log's
//! put-if-absent commits keep both writers safe), its catalog entry and its
//! sink, under the pod's DDL lock.

use std::collections::HashMap;
use std::sync::Arc;

use super::access::require_admin;
use super::policy::{
    added_columns, attach_url, delta_columns, delta_configuration, parse_columns, split_name,
};
use crate::auth::Caller;
use crate::catalog::{now_millis, TableEntry};
use crate::error::{Result, ServerError};
use crate::pod::{open_sink, Pod};

/// What a new table is asked to be.
#[derive(Debug, Clone, Default)]
pub struct NewTable {
    /// `catalog.schema.table`.
    pub name: String,
    /// Its columns as SQL text (`id BIGINT NOT NULL, name STRING`).
    pub columns: String,
    /// Where the Delta table lives; default `<warehouse>/<catalog>/<schema>/<table>`.
    pub storage_location: Option<String>,
    /// Table properties; `delta.*` ones (e.g. `delta.checkpointInterval`,
    /// `delta.logRetentionDuration`, `delta.targetFileSize`) go to the new
    /// Delta table's configuration; `sluice.rescuedData=true` and
    /// `sluice.systemColumns=true` add those columns.
    pub properties: HashMap<String, String>,
}

/// Creates a table (admin only) and starts its sink; returns its catalog entry.
pub async fn create_table(pod: &Pod, caller: &Caller, new: NewTable) -> Result<TableEntry> {
    require_admin(caller)?;
    let (catalog, schema_name, table) = split_name(&new.name)?;
    let schema = parse_columns(&new.columns)?;
    let full_name = format!("{catalog}.{schema_name}.{table}");
    let _ddl = pod.ddl.lock().await;
    if pod.catalog.table(&full_name)?.is_some() {
        return Err(ServerError::AlreadyExists(format!(
            "table {full_name} already exists"
        )));
    }
    let url = match &new.storage_location {
        Some(location) => attach_url(pod.warehouse.root(), location)?,
        None => pod.warehouse.table_url(&catalog, &schema_name, &table)?,
    };
    let added = added_columns(&schema, &new.properties)?;
    let fields = delta_columns(&schema, added)?;
    let existing = pod.warehouse.open_or_empty(&url).await?;
    if existing.version().is_some() {
        if new.storage_location.is_none() {
            return Err(ServerError::AlreadyExists(format!(
                "a Delta table already exists at {url}; remove it, choose another name, \
                 or name it as storage_location to attach to it"
            )));
        }
        let have: Vec<_> = existing.snapshot()?.schema().fields().cloned().collect();
        if have != fields {
            return Err(ServerError::InvalidArgument(format!(
                "the Delta table at {url} has other columns than the ones asked for"
            )));
        }
        tracing::info!(table = %full_name, location = %url, "attached to an existing Delta table");
    } else {
        existing
            .create()
            .with_table_name(&table)
            .with_columns(fields)
            .with_configuration(delta_configuration(&new.properties))
            .await?;
    }
    let entry = pod.catalog.create_table(TableEntry {
        system_columns: added.system_columns,
        rescued_data: added.rescued_data,
        ..TableEntry::new(
            full_name.clone(),
            schema.to_sql(),
            url.to_string(),
            uuid::Uuid::new_v4().to_string(),
            now_millis(),
        )
    })?;
    let sink = open_sink(pod.sink_env(), &entry).await?;
    pod.sinks.insert(Arc::new(sink))?;
    tracing::info!(table = %full_name, location = %url, "table created");
    Ok(entry)
}
