//! Table permissions, in the Unity Catalog shape (admin token required):
//!
//! - `GET /api/2.1/unity-catalog/permissions/table/{full_name}` answers
//!   `{"privilege_assignments": [{"principal", "privileges"}]}`;
//! - `PATCH` the same path with
//!   `{"changes": [{"principal", "add": ["MODIFY"], "remove": ["SELECT"]}]}`
//!   grants and revokes. A revoke takes effect at the next stream creation,
//!   even for tokens issued before it.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use serde::{Deserialize, Serialize};

use super::principals::require_admin;
use super::uc::error_response;
use crate::audit::{self, Action};
use crate::auth::Caller;
use crate::catalog::{Grant, Privilege};
use crate::error::{Result, ServerError};
use crate::pod::Pod;

/// One change of a PATCH.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct PermissionChange {
    /// Client id of the principal.
    pub principal: String,
    /// Privileges to grant.
    #[serde(default)]
    pub add: Vec<String>,
    /// Privileges to revoke.
    #[serde(default)]
    pub remove: Vec<String>,
}

/// Body of a PATCH.
#[derive(Serialize, Deserialize, Debug, Default)]
pub struct PermissionsUpdate {
    /// The changes, applied in order.
    pub changes: Vec<PermissionChange>,
}

/// What one principal holds on the table.
#[derive(Serialize, Deserialize, Debug)]
pub struct PrivilegeAssignment {
    /// Client id.
    pub principal: String,
    /// `MODIFY`, `SELECT`.
    pub privileges: Vec<String>,
}

fn privilege(text: &str) -> Result<Privilege> {
    Privilege::parse(text).ok_or_else(|| {
        ServerError::InvalidArgument(format!("unknown privilege `{text}` (MODIFY or SELECT)"))
    })
}

fn assignments(pod: &Pod, table: &str) -> Result<serde_json::Value> {
    let mut by_principal: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for g in pod
        .catalog
        .grants()?
        .into_iter()
        .filter(|g| g.table == table)
    {
        by_principal
            .entry(g.client_id)
            .or_default()
            .push(g.privilege.as_str().to_string());
    }
    let list: Vec<PrivilegeAssignment> = by_principal
        .into_iter()
        .map(|(principal, privileges)| PrivilegeAssignment {
            principal,
            privileges,
        })
        .collect();
    Ok(serde_json::json!({ "privilege_assignments": list }))
}

fn table_name(pod: &Pod, full_name: &str) -> Result<String> {
    let (c, s, t) = crate::tables::split_name(full_name)?;
    let name = format!("{c}.{s}.{t}");
    pod.catalog
        .table(&name)?
        .ok_or_else(|| ServerError::NotFound(format!("table {name} does not exist")))?;
    Ok(name)
}

fn respond(r: Result<serde_json::Value>) -> Response {
    match r {
        Ok(v) => Json(v).into_response(),
        Err(e) => error_response(&e),
    }
}

/// GET: who holds what on the table.
pub async fn get(
    State(pod): State<Arc<Pod>>,
    Extension(caller): Extension<Caller>,
    Path(full_name): Path<String>,
) -> Response {
    respond((|| {
        require_admin(&caller)?;
        let table = table_name(&pod, &full_name)?;
        assignments(&pod, &table)
    })())
}

/// PATCH: grant and revoke.
pub async fn update(
    State(pod): State<Arc<Pod>>,
    Extension(caller): Extension<Caller>,
    Path(full_name): Path<String>,
    Json(body): Json<PermissionsUpdate>,
) -> Response {
    let mut done = Vec::new();
    let updated = (|| {
        require_admin(&caller)?;
        let table = table_name(&pod, &full_name)?;
        for change in &body.changes {
            let grant = |p: &str| -> Result<Grant> {
                Ok(Grant {
                    client_id: change.principal.clone(),
                    table: table.clone(),
                    privilege: privilege(p)?,
                })
            };
            for p in &change.add {
                pod.catalog.grant(grant(p)?)?;
                tracing::info!(principal = %change.principal, %table, privilege = %p, "granted");
                done.push((Action::Grant, table.clone(), change.principal.clone(), p));
            }
            for p in &change.remove {
                pod.catalog.revoke(&grant(p)?)?;
                tracing::info!(principal = %change.principal, %table, privilege = %p, "revoked");
                done.push((Action::Revoke, table.clone(), change.principal.clone(), p));
            }
        }
        assignments(&pod, &table)
    })();
    // Each change that was made is audited, even when a later one of the request failed.
    for (action, table, principal, privilege) in done {
        let detail = format!("{} to {principal}", privilege.to_ascii_uppercase());
        audit::record(&pod, &caller, action, &table, detail).await;
    }
    respond(updated)
}
