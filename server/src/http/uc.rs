//! Unity Catalog REST shapes (`TableInfo`, `ColumnInfo`, errors), so tooling
//! that reads a table's columns from `/api/2.1/unity-catalog/tables/{name}` —
//! the official SDKs' `descriptor_from_uc_schema` among them — works as is.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use sluice_zeroparser::{ColumnType, TableSchema};

use crate::catalog::TableEntry;
use crate::error::{Result, ServerError};
use crate::sink::delta_fields;

/// A column as the UC API shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ColumnInfo {
    /// Column name.
    pub name: String,
    /// Type as SQL text, e.g. `array<string>`.
    #[serde(default)]
    pub type_text: String,
    /// Top-level type name, e.g. `LONG`, `ARRAY`.
    #[serde(default)]
    pub type_name: String,
    /// The Delta/Spark JSON of the column (`{"name","type","nullable","metadata"}`).
    #[serde(default)]
    pub type_json: String,
    /// Position, from 0.
    #[serde(default)]
    pub position: i32,
    /// Whether NULL is allowed.
    #[serde(default = "yes")]
    pub nullable: bool,
}

fn yes() -> bool {
    true
}

/// A table as the UC API shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TableInfo {
    /// Table name.
    pub name: String,
    /// Catalog name.
    pub catalog_name: String,
    /// Schema name.
    pub schema_name: String,
    /// `catalog.schema.table`.
    pub full_name: String,
    /// Always `MANAGED`.
    pub table_type: String,
    /// Always `DELTA`.
    pub data_source_format: String,
    /// Columns in order.
    pub columns: Vec<ColumnInfo>,
    /// URL of the Delta table.
    pub storage_location: String,
    /// Stable id.
    pub table_id: String,
    /// Creation time (ms since the epoch).
    pub created_at: i64,
    /// Delta version of the last `sluice table alter` (0: none); an alter can
    /// name it (`expected_schema_version`) to be refused if the table changed.
    #[serde(default)]
    pub schema_version: i64,
}

/// UC `type_name` of a column type.
pub fn uc_type_name(t: &ColumnType) -> &'static str {
    match t {
        ColumnType::TinyInt => "BYTE",
        ColumnType::SmallInt => "SHORT",
        ColumnType::Int => "INT",
        ColumnType::BigInt => "LONG",
        ColumnType::Float => "FLOAT",
        ColumnType::Double => "DOUBLE",
        ColumnType::String => "STRING",
        ColumnType::Variant => "VARIANT",
        ColumnType::Boolean => "BOOLEAN",
        ColumnType::Binary => "BINARY",
        ColumnType::Date => "DATE",
        ColumnType::Timestamp => "TIMESTAMP",
        ColumnType::TimestampNtz => "TIMESTAMP_NTZ",
        ColumnType::Array { .. } => "ARRAY",
        ColumnType::Map { .. } => "MAP",
        ColumnType::Struct(_) => "STRUCT",
    }
}

/// The UC columns of a schema.
pub fn column_infos(schema: &TableSchema) -> Result<Vec<ColumnInfo>> {
    let fields = delta_fields(&schema.columns)?;
    schema
        .columns
        .iter()
        .zip(fields)
        .enumerate()
        .map(|(i, (c, f))| {
            Ok(ColumnInfo {
                name: c.name.clone(),
                type_text: c.data_type.sql().to_ascii_lowercase(),
                type_name: uc_type_name(&c.data_type).to_string(),
                type_json: serde_json::to_string(&f)
                    .map_err(|e| ServerError::Internal(format!("type_json: {e}")))?,
                position: i as i32,
                nullable: c.nullable,
            })
        })
        .collect()
}

/// The UC view of a catalog entry.
pub fn table_info(entry: &TableEntry) -> Result<TableInfo> {
    let mut parts = entry.full_name.splitn(3, '.');
    let catalog = parts.next().unwrap_or_default().to_string();
    let schema = parts.next().unwrap_or_default().to_string();
    let name = parts.next().unwrap_or_default().to_string();
    Ok(TableInfo {
        name,
        catalog_name: catalog,
        schema_name: schema,
        full_name: entry.full_name.clone(),
        table_type: "MANAGED".into(),
        data_source_format: "DELTA".into(),
        columns: column_infos(&entry.schema()?)?,
        storage_location: entry.storage_location.clone(),
        table_id: entry.table_id.clone(),
        created_at: entry.created_at,
        schema_version: entry.schema_version,
    })
}

/// A UC-style error response.
pub fn error_response(e: &ServerError) -> Response {
    let (status, code) = match e {
        ServerError::InvalidArgument(_) | ServerError::Config(_) => {
            (StatusCode::BAD_REQUEST, "INVALID_PARAMETER_VALUE")
        }
        ServerError::NotFound(_) => (StatusCode::NOT_FOUND, "TABLE_DOES_NOT_EXIST"),
        ServerError::AlreadyExists(_) => (StatusCode::CONFLICT, "TABLE_ALREADY_EXISTS"),
        ServerError::Unauthenticated(_) => (StatusCode::UNAUTHORIZED, "UNAUTHENTICATED"),
        ServerError::PermissionDenied(_) => (StatusCode::FORBIDDEN, "PERMISSION_DENIED"),
        ServerError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "TEMPORARILY_UNAVAILABLE"),
        ServerError::FailedPrecondition(_) => (StatusCode::CONFLICT, "FAILED_PRECONDITION"),
        ServerError::Unimplemented(_) => (StatusCode::NOT_IMPLEMENTED, "NOT_IMPLEMENTED"),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL_ERROR"),
    };
    (
        status,
        Json(serde_json::json!({ "error_code": code, "message": e.to_string() })),
    )
        .into_response()
}
