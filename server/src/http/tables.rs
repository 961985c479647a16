//! Handlers of `/api/2.1/unity-catalog/tables`: create, get, list, delete.
//! Creating a table creates its Delta table under the warehouse, registers
//! it in the catalog and starts its sink; deleting removes all three.
//! A create that names a `storage_location` where a Delta table with the same
//! columns exists attaches to it instead (another pod writes it too: the
//! Delta log's put-if-absent commits keep both writers safe).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::TryStreamExt;
use object_store::ObjectStoreExt;
use serde::Deserialize;
use sluice_zeroparser::TableSchema;

use super::uc::{error_response, table_info, ColumnInfo};
use crate::auth::Caller;
use crate::catalog::{now_millis, TableEntry};
use crate::error::{Result, ServerError};
use crate::pod::{open_sink, Pod};
use crate::sink::{delta_fields, rescued_data, system_columns};

/// Body of a create request (UC `CreateTable`).
#[derive(Deserialize)]
pub struct CreateTable {
    name: String,
    #[serde(default)]
    catalog_name: Option<String>,
    #[serde(default)]
    schema_name: Option<String>,
    #[serde(default)]
    columns: Vec<ColumnInfo>,
    /// Where the Delta table lives; default `<warehouse>/<catalog>/<schema>/<table>`.
    #[serde(default)]
    storage_location: Option<String>,
    /// Table properties; `delta.*` ones (e.g. `delta.checkpointInterval`,
    /// `delta.logRetentionDuration`, `delta.targetFileSize`) go to the new
    /// Delta table's configuration; `sluice.rescuedData=true` and
    /// `sluice.systemColumns=true` add those columns.
    #[serde(default)]
    properties: HashMap<String, String>,
}

fn caller(pod: &Pod, headers: &HeaderMap) -> Result<Caller> {
    let header = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    pod.auth.verify_bearer(header)
}

pub(super) fn admin(pod: &Pod, headers: &HeaderMap) -> Result<Caller> {
    let c = caller(pod, headers)?;
    if !c.is_admin() {
        return Err(ServerError::PermissionDenied(
            "this token may not change the catalog (admin only)".into(),
        ));
    }
    Ok(c)
}

fn respond<T: serde::Serialize>(r: Result<T>) -> Response {
    match r {
        Ok(v) => Json(v).into_response(),
        Err(e) => error_response(&e),
    }
}

/// Checks and splits `catalog.schema.table` (names: letters, digits, `_`).
pub fn split_name(full: &str) -> Result<(String, String, String)> {
    let parts: Vec<&str> = full.split('.').collect();
    let valid = |p: &str| {
        !p.is_empty() && p.len() <= 255 && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    match parts.as_slice() {
        [c, s, t] if valid(c) && valid(s) && valid(t) => Ok((
            c.to_ascii_lowercase(),
            s.to_ascii_lowercase(),
            t.to_ascii_lowercase(),
        )),
        _ => Err(ServerError::InvalidArgument(format!(
            "table name `{full}` must be catalog.schema.table (letters, digits and _)"
        ))),
    }
}

/// POST: create a table.
pub async fn create(
    State(pod): State<Arc<Pod>>,
    headers: HeaderMap,
    Json(body): Json<CreateTable>,
) -> Response {
    respond(create_table(&pod, &headers, body).await)
}

async fn create_table(
    pod: &Pod,
    headers: &HeaderMap,
    body: CreateTable,
) -> Result<super::TableInfo> {
    admin(pod, headers)?;
    let full = match (&body.catalog_name, &body.schema_name) {
        (Some(c), Some(s)) if !body.name.contains('.') => format!("{c}.{s}.{}", body.name),
        _ => body.name.clone(),
    };
    let (catalog, schema_name, table) = split_name(&full)?;
    if body.columns.is_empty() {
        return Err(ServerError::InvalidArgument(
            "a table needs at least one column".into(),
        ));
    }
    let text = body
        .columns
        .iter()
        .map(|c| {
            let ty = if c.type_text.is_empty() {
                &c.type_name
            } else {
                &c.type_text
            };
            let not_null = if c.nullable { "" } else { " NOT NULL" };
            format!("`{}` {ty}{not_null}", c.name.replace('`', ""))
        })
        .collect::<Vec<_>>()
        .join(", ");
    let schema = TableSchema::parse(&text)
        .map_err(|e| ServerError::InvalidArgument(format!("columns: {e}")))?;
    let full_name = format!("{catalog}.{schema_name}.{table}");
    let _ddl = pod.ddl.lock().await;
    if pod.catalog.table(&full_name)?.is_some() {
        return Err(ServerError::AlreadyExists(format!(
            "table {full_name} already exists"
        )));
    }
    let url = match &body.storage_location {
        Some(location) => attach_url(pod, location)?,
        None => pod.warehouse.table_url(&catalog, &schema_name, &table)?,
    };
    let system_columns = property_on(&body.properties, system_columns::PROPERTY);
    let rescued_data = property_on(&body.properties, rescued_data::PROPERTY);
    if rescued_data {
        rescued_data::check_schema(&schema)?;
    }
    // The table's columns, then `_rescued_data`, then the system columns.
    let mut fields = delta_fields(&schema.columns)?;
    if rescued_data {
        fields.push(rescued_data::delta_field());
    }
    if system_columns {
        fields.extend(system_columns::delta_fields());
    }
    let existing = pod.warehouse.open_or_empty(&url).await?;
    if existing.version().is_some() {
        if body.storage_location.is_none() {
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
        let configuration = body
            .properties
            .iter()
            .filter(|(k, _)| k.starts_with("delta."))
            .map(|(k, v)| (k.clone(), Some(v.clone())));
        existing
            .create()
            .with_table_name(&table)
            .with_columns(fields)
            .with_configuration(configuration)
            .await?;
    }
    let entry = pod.catalog.create_table(TableEntry {
        full_name: full_name.clone(),
        columns: schema.to_sql(),
        storage_location: url.to_string(),
        table_id: uuid::Uuid::new_v4().to_string(),
        created_at: now_millis(),
        system_columns,
        rescued_data,
    })?;
    let sink = open_sink(&pod.warehouse, &entry, &pod.wal, pod.config.flush_bytes).await?;
    pod.sinks.insert(Arc::new(sink))?;
    tracing::info!(table = %full_name, location = %url, "table created");
    table_info(&entry)
}

/// Whether the `sluice.*` table property `name` is set to `true` (any case).
fn property_on(properties: &HashMap<String, String>, name: &str) -> bool {
    properties
        .get(name)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// The URL of an explicit `storage_location`: same scheme as the warehouse
/// (its storage options must fit), ending with `/`.
fn attach_url(pod: &Pod, location: &str) -> Result<url::Url> {
    let with_slash = if location.ends_with('/') {
        location.to_string()
    } else {
        format!("{location}/")
    };
    let url = url::Url::parse(&with_slash)
        .map_err(|e| ServerError::InvalidArgument(format!("storage_location `{location}`: {e}")))?;
    if url.scheme() != pod.warehouse.root().scheme() {
        return Err(ServerError::InvalidArgument(format!(
            "storage_location `{location}` is not on the warehouse's store ({})",
            pod.warehouse.root().scheme()
        )));
    }
    Ok(url)
}

/// GET one table.
pub async fn get(
    State(pod): State<Arc<Pod>>,
    headers: HeaderMap,
    Path(full_name): Path<String>,
) -> Response {
    respond((|| {
        let c = caller(&pod, &headers)?;
        if !c.is_admin() && !c.may_read(&full_name) {
            return Err(ServerError::PermissionDenied(format!(
                "this token does not cover table {full_name}"
            )));
        }
        let entry = pod
            .catalog
            .table(&full_name)?
            .ok_or_else(|| ServerError::NotFound(format!("table {full_name} does not exist")))?;
        table_info(&entry)
    })())
}

/// GET the list (optionally filtered by `catalog_name` and `schema_name`).
pub async fn list(
    State(pod): State<Arc<Pod>>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    respond((|| {
        let c = caller(&pod, &headers)?;
        let mut tables = Vec::new();
        for entry in pod.catalog.tables()? {
            let info = table_info(&entry)?;
            let keep = query
                .get("catalog_name")
                .is_none_or(|v| v.eq_ignore_ascii_case(&info.catalog_name))
                && query
                    .get("schema_name")
                    .is_none_or(|v| v.eq_ignore_ascii_case(&info.schema_name))
                && (c.is_admin() || c.may_read(&info.full_name));
            if keep {
                tables.push(info);
            }
        }
        Ok(serde_json::json!({ "tables": tables }))
    })())
}

/// DELETE a table: catalog entry, sink and data.
pub async fn delete(
    State(pod): State<Arc<Pod>>,
    headers: HeaderMap,
    Path(full_name): Path<String>,
) -> Response {
    match delete_table(&pod, &headers, &full_name).await {
        Ok(()) => (StatusCode::OK, Json(serde_json::json!({}))).into_response(),
        Err(e) => error_response(&e),
    }
}

async fn delete_table(pod: &Pod, headers: &HeaderMap, full_name: &str) -> Result<()> {
    admin(pod, headers)?;
    let _ddl = pod.ddl.lock().await;
    let entry = pod.catalog.drop_table(full_name)?;
    pod.sinks.remove(&entry.full_name)?;
    let url = url::Url::parse(&entry.storage_location)
        .map_err(|e| ServerError::Internal(format!("location: {e}")))?;
    let table = pod.warehouse.open_or_empty(&url).await?;
    let store = table.object_store();
    let paths: Vec<_> = store
        .list(None)
        .map_ok(|m| m.location)
        .try_collect()
        .await
        .map_err(|e| ServerError::Internal(format!("listing table files: {e}")))?;
    for path in paths {
        store
            .delete(&path)
            .await
            .map_err(|e| ServerError::Internal(format!("deleting {path}: {e}")))?;
    }
    if let Ok(dir) = url.to_file_path() {
        match tokio::fs::remove_dir_all(&dir).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(ServerError::io(format!("removing {}", dir.display()), e)),
        }
    }
    tracing::info!(table = %entry.full_name, "table dropped");
    Ok(())
}
