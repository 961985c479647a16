//! Handlers of `/api/2.1/unity-catalog/tables`: create, get, list, alter
//! (`PATCH`, Sluice's own body: [`AlterTable`]), delete.
//! Each authenticates the request, turns the UC-shaped body into a call of
//! the tables service (`crate::tables`, which owns the DDL and the rights
//! checks) and its answer into a UC-shaped response.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use serde::Deserialize;

use super::uc::{error_response, table_info, ColumnInfo};
use crate::audit::{self, Action};
use crate::auth::Caller;
use crate::error::Result;
use crate::pod::Pod;
use crate::tables::{self, NewTable};

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
    /// Table properties (see [`NewTable::properties`]).
    #[serde(default)]
    properties: HashMap<String, String>,
}

impl CreateTable {
    /// The service's request: the full name (from `name`, or `catalog_name`,
    /// `schema_name` and a bare `name`) and the columns as SQL text.
    fn into_new_table(self) -> NewTable {
        let name = match (&self.catalog_name, &self.schema_name) {
            (Some(c), Some(s)) if !self.name.contains('.') => format!("{c}.{s}.{}", self.name),
            _ => self.name,
        };
        NewTable {
            name,
            columns: columns_sql(&self.columns),
            storage_location: self.storage_location,
            properties: self.properties,
        }
    }
}

/// UC column infos as a SQL column list (`type_text`, else `type_name`).
fn columns_sql(columns: &[ColumnInfo]) -> String {
    columns
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
        .join(", ")
}

fn respond<T: serde::Serialize>(r: Result<T>) -> Response {
    match r {
        Ok(v) => Json(v).into_response(),
        Err(e) => error_response(&e),
    }
}

/// POST: create a table.
pub async fn create(
    State(pod): State<Arc<Pod>>,
    Extension(caller): Extension<Caller>,
    Json(body): Json<CreateTable>,
) -> Response {
    let created = async {
        let entry = tables::create_table(&pod, &caller, body.into_new_table()).await?;
        audit::record(
            &pod,
            &caller,
            Action::TableCreate,
            &entry.full_name,
            entry.storage_location.clone(),
        )
        .await;
        table_info(&entry)
    };
    respond(created.await)
}

/// GET one table.
pub async fn get(
    State(pod): State<Arc<Pod>>,
    Extension(caller): Extension<Caller>,
    Path(full_name): Path<String>,
) -> Response {
    respond((|| {
        table_info(&tables::get_table(&pod, &caller, &full_name)?)
    })())
}

/// GET the list (optionally filtered by `catalog_name` and `schema_name`).
pub async fn list(
    State(pod): State<Arc<Pod>>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    respond((|| {
        let mut tables = Vec::new();
        for entry in tables::list_tables(&pod, &caller)? {
            let info = table_info(&entry)?;
            let keep = query
                .get("catalog_name")
                .is_none_or(|v| v.eq_ignore_ascii_case(&info.catalog_name))
                && query
                    .get("schema_name")
                    .is_none_or(|v| v.eq_ignore_ascii_case(&info.schema_name));
            if keep {
                tables.push(info);
            }
        }
        Ok(serde_json::json!({ "tables": tables }))
    })())
}

/// Body of an alter request (`PATCH …/tables/{full_name}`); see
/// [`crate::evolve::Alter`].
#[derive(Deserialize, Default)]
pub struct AlterTable {
    #[serde(default)]
    add_columns: Option<String>,
    #[serde(default)]
    widen: Vec<String>,
    #[serde(default)]
    drop_columns: Vec<String>,
    #[serde(default)]
    rename_column: Option<String>,
    #[serde(default)]
    set_properties: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    expected_schema_version: Option<i64>,
    #[serde(default)]
    rewrite: bool,
}

/// PATCH a table: change its schema or properties (`sluice table alter`).
pub async fn alter(
    State(pod): State<Arc<Pod>>,
    Extension(caller): Extension<Caller>,
    Path(full_name): Path<String>,
    Json(body): Json<AlterTable>,
) -> Response {
    let alter = crate::evolve::Alter {
        add_columns: body.add_columns,
        widen: body.widen,
        drop_columns: body.drop_columns,
        rename_column: body.rename_column,
        set_properties: body.set_properties,
        expected_schema_version: body.expected_schema_version,
        rewrite: body.rewrite,
    };
    let altered = async {
        let entry = tables::alter_table(&pod, &caller, &full_name, alter).await?;
        let detail = format!("schema version {}: {}", entry.schema_version, entry.columns);
        audit::record(&pod, &caller, Action::TableAlter, &entry.full_name, detail).await;
        table_info(&entry)
    };
    respond(altered.await)
}

/// DELETE a table: catalog entry, sink and data.
pub async fn delete(
    State(pod): State<Arc<Pod>>,
    Extension(caller): Extension<Caller>,
    Path(full_name): Path<String>,
) -> Response {
    let dropped = async {
        tables::drop_table(&pod, &caller, &full_name).await?;
        let name = full_name.to_ascii_lowercase();
        audit::record(&pod, &caller, Action::TableDrop, &name, String::new()).await;
        Ok::<_, crate::error::ServerError>(())
    };
    match dropped.await {
        Ok(()) => (StatusCode::OK, Json(serde_json::json!({}))).into_response(),
        Err(e) => error_response(&e),
    }
}

#[cfg(test)]
mod tests {
    use sluice_zeroparser::TableSchema;

    use super::*;
    use crate::http::column_infos;

    fn body(name: &str, catalog: Option<&str>, schema: Option<&str>) -> CreateTable {
        CreateTable {
            name: name.into(),
            catalog_name: catalog.map(str::to_string),
            schema_name: schema.map(str::to_string),
            columns: Vec::new(),
            storage_location: None,
            properties: HashMap::new(),
        }
    }

    #[test]
    fn the_full_name_comes_from_name_or_its_three_parts() {
        let named = |b: CreateTable| b.into_new_table().name;
        assert_eq!(named(body("c.s.t", None, None)), "c.s.t");
        assert_eq!(named(body("t", Some("c"), Some("s"))), "c.s.t");
        // A dotted name wins over the parts; a missing part leaves the name alone.
        assert_eq!(named(body("a.b.t", Some("c"), Some("s"))), "a.b.t");
        assert_eq!(named(body("t", Some("c"), None)), "t");
    }

    #[test]
    fn column_infos_become_the_same_columns_as_sql() {
        let schema = TableSchema::parse("id BIGINT NOT NULL, `na``me` STRING, tags ARRAY<STRING>")
            .expect("schema");
        let mut infos = column_infos(&schema).expect("infos");
        let sql = columns_sql(&infos);
        let back = TableSchema::parse(&sql).expect("parses back");
        assert_eq!(back.columns.len(), 3);
        assert_eq!(back.columns[1].name, "name", "backquotes are dropped");
        assert_eq!(back.columns[0].data_type, schema.columns[0].data_type);
        assert_eq!(back.columns[2].data_type, schema.columns[2].data_type);
        assert!(!back.columns[0].nullable && back.columns[1].nullable);
        // Without type_text, type_name is used.
        infos[0].type_text.clear();
        infos[0].type_name = "BIGINT".into();
        assert!(columns_sql(&infos[..1]).starts_with("`id` BIGINT NOT NULL"));
        assert_eq!(columns_sql(&[]), "");
    }
}
