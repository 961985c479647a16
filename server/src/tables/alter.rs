//! Altering a table (`sluice table alter`, `PATCH` on the tables API), under
//! the pod's DDL lock: a pending alter left by a crash is settled first, the
//! change is checked (`evolve::plan`), recorded as pending in the catalog,
//! committed to Delta as one metadata commit, completed in the catalog, and
//! applied to this pod's sink. Other pods apply it when their next stream of
//! the table opens (`Pod::sink_for` compares the catalog's columns with the
//! sink's). Open streams keep running: their rows lack the new columns, which
//! a flush fills with nulls (`sink::fit`). A widen, drop or rename with
//! `rewrite` commits the rewritten data files with the new schema
//! (`evolve::rewrite`); streams writing a dropped or renamed column are
//! then ended by their pod (`ingest::stream`).

use std::time::Duration;

use super::access::require_admin;
use crate::auth::Caller;
use crate::catalog::TableEntry;
use crate::error::{Result, ServerError};
use crate::evolve::{self, Alter};
use crate::pod::Pod;
use crate::sink::delta_columns;

/// Test hook: with this variable set to a duration (`2s`), an alter waits that long
/// between its Delta commit and its catalog update, so a test can SIGKILL the pod there.
pub const PAUSE_AFTER_COMMIT_ENV: &str = "SLUICE_TEST_ALTER_PAUSE_AFTER_COMMIT";

/// Alters table `full_name` (admin only); returns its catalog entry after the change.
pub async fn alter_table(
    pod: &Pod,
    caller: &Caller,
    full_name: &str,
    alter: Alter,
) -> Result<TableEntry> {
    require_admin(caller)?;
    alter_table_unchecked(pod, full_name, alter).await
}

/// [`alter_table`] without the caller's rights (auto-evolve, which a
/// producer's stream triggers on a table whose admin opted in).
pub async fn alter_table_unchecked(pod: &Pod, full_name: &str, alter: Alter) -> Result<TableEntry> {
    let _ddl = pod.ddl.lock().await;
    let entry = pod
        .catalog
        .table(full_name)?
        .ok_or_else(|| ServerError::NotFound(format!("table {full_name} does not exist")))?;
    // Another pod's alter under way stays pending: `begin_alter` refuses, naming it.
    let entry = evolve::settle(&pod.catalog, &pod.warehouse, entry, pod.pod_id()).await?;
    if let Some(expected) = alter.expected_schema_version {
        if expected != entry.schema_version {
            return Err(ServerError::FailedPrecondition(format!(
                "alter of {}: its schema version is {}, not {expected} (the table changed \
                 meanwhile); describe it again and retry",
                entry.full_name, entry.schema_version
            )));
        }
    }
    let schema = entry.schema()?;
    let added = entry.added_columns();
    let url = url::Url::parse(&entry.storage_location)
        .map_err(|e| ServerError::Internal(format!("bad location of {}: {e}", entry.full_name)))?;
    let mut table = pod.warehouse.open(&url).await?;
    let partitions = table.snapshot()?.metadata().partition_columns().to_vec();
    let plan = evolve::plan(&schema, added, &partitions, &alter)?;
    let expected = delta_columns(&schema, added)?;
    let next = delta_columns(&plan.schema, added)?;
    let added_fields: Vec<_> = next
        .iter()
        .filter(|f| plan.added.iter().any(|n| n == f.name()))
        .cloned()
        .collect();
    let entry = if plan.sluice_properties.is_empty() {
        entry
    } else {
        pod.catalog
            .set_table_properties(&entry.full_name, &plan.sluice_properties)?
    };
    if plan.schema == schema && plan.properties.is_empty() {
        if let Some(sink) = pod.sinks.get(&entry.full_name) {
            sink.set_auto_evolve(entry.auto_evolve());
        }
        tracing::info!(table = %entry.full_name, properties = ?plan.sluice_properties, "table altered (catalog properties only)");
        return Ok(entry);
    }
    let columns = plan.schema.to_sql();
    pod.catalog
        .begin_alter(&entry.full_name, &entry.columns, &columns, pod.pod_id())?;
    let committed = if plan.rewrite {
        evolve::rewrite::commit_rewrite(
            &mut table,
            pod.warehouse.storage_options(),
            &entry.full_name,
            &expected,
            &next,
            &plan.properties,
            &plan.renames,
        )
        .await
        .map(|done| {
            tracing::info!(table = %entry.full_name, version = done.version, rows = done.rows,
                files_removed = done.files_removed, files_added = done.files_added,
                attempts = done.attempts, seconds = done.seconds,
                rows_per_second = done.rows as f64 / done.seconds.max(1e-9),
                "table rewritten under its new schema");
            done.version
        })
    } else {
        evolve::delta::commit_schema(
            &mut table,
            &entry.full_name,
            &expected,
            &next,
            &plan.properties,
            &added_fields,
        )
        .await
    };
    let version = match committed {
        Ok(version) => version,
        Err(e) => {
            match landed_after_all(pod, &entry.full_name, &url, &next, &plan.properties).await {
                Some(version) => {
                    tracing::warn!(table = %entry.full_name, version, "the alter's commit reported \"{e}\" but is in the log: done");
                    version
                }
                None => return Err(e),
            }
        }
    };
    if let Some(pause) = std::env::var(PAUSE_AFTER_COMMIT_ENV)
        .ok()
        .and_then(|v| humantime::parse_duration(&v).ok())
    {
        tracing::warn!(table = %entry.full_name, version, "test hook: pausing between the Delta commit and the catalog update");
        tokio::time::sleep(pause.min(Duration::from_secs(60))).await;
    }
    let version = i64::try_from(version)
        .map_err(|_| ServerError::Internal(format!("version {version} out of range")))?;
    let entry = pod
        .catalog
        .finish_alter(&entry.full_name, &entry.columns, &columns, version)?;
    if let Some(sink) = pod.sinks.get(&entry.full_name) {
        sink.evolve(entry.schema()?).await?;
        sink.set_auto_evolve(entry.auto_evolve());
    }
    tracing::info!(table = %entry.full_name, version, columns = %entry.columns, properties = ?plan.properties, "table altered");
    Ok(entry)
}

/// After an alter's commit reported an error: the commit may still have landed (an answer
/// lost on the way back, then a retry that found the file there). Settles the table (the
/// log decides what the catalog holds) and returns the version the alter landed at when the
/// log's newest metadata is this alter's: its columns `next` and every Delta property it
/// set. `None` when it did not land, or when the log cannot be read to tell.
async fn landed_after_all(
    pod: &Pod,
    full_name: &str,
    url: &url::Url,
    next: &[deltalake::kernel::StructField],
    properties: &std::collections::BTreeMap<String, String>,
) -> Option<u64> {
    let settled = async {
        let now = pod
            .catalog
            .table(full_name)?
            .ok_or_else(|| ServerError::NotFound(format!("table {full_name} does not exist")))?;
        evolve::settle(&pod.catalog, &pod.warehouse, now, pod.pod_id()).await?;
        let mut table = pod.warehouse.open(url).await?;
        crate::commit::reload(&mut table).await?;
        let snapshot = table.snapshot()?;
        let config = snapshot.metadata().configuration();
        let mine = evolve::delta::delta_schema(&table)? == next
            && properties.iter().all(|(k, v)| config.get(k) == Some(v));
        Ok::<_, ServerError>(mine.then(|| table.version()).flatten())
    };
    match settled.await {
        Ok(version) => version,
        Err(e) => {
            tracing::error!(table = %full_name, "settling a failed alter: {e}");
            None
        }
    }
}
