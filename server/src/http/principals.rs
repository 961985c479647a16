//! Sluice's own admin API for principals and signing keys (admin token
//! required):
//!
//! - `GET /api/sluice/v1/principals`: every principal with its grants;
//! - `POST /api/sluice/v1/principals` `{"name": "..."}`: creates one and
//!   answers its client id and secret (shown this once; only a salted hash
//!   is stored);
//! - `DELETE /api/sluice/v1/principals/{client_id}`: deletes it and its grants;
//! - `POST /api/sluice/v1/keys/rotate`: adds a new token-signing key.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::Response;
use axum::Extension;
use axum::Json;
use serde::{Deserialize, Serialize};

use super::uc::error_response;
use crate::audit::{self, Action};
use crate::auth::{generate_secret, hash_secret, Caller};
use crate::catalog::PrincipalEntry;
use crate::error::{Result, ServerError};
use crate::pod::Pod;

/// Body of a create request.
#[derive(Deserialize)]
pub struct CreatePrincipal {
    name: String,
    #[serde(default)]
    admin: bool,
}

/// A principal as the API shows it (never its secret or hash).
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct PrincipalInfo {
    /// OAuth client id (the name given at creation).
    pub client_id: String,
    /// Whether it may manage the catalog.
    pub admin: bool,
    /// `PRIVILEGE catalog.schema.table` strings.
    #[serde(default)]
    pub grants: Vec<String>,
}

/// Answer to a create request.
#[derive(Serialize, Deserialize, Debug)]
pub struct CreatedPrincipal {
    /// OAuth client id.
    pub client_id: String,
    /// OAuth client secret, shown once.
    pub client_secret: String,
}

/// Refuses a caller (verified by the gate in `authenticated`) that is not an admin.
pub fn require_admin(caller: &Caller) -> Result<()> {
    if !caller.is_admin() {
        return Err(ServerError::PermissionDenied(
            "this token may not manage principals, grants or keys (admin only)".into(),
        ));
    }
    Ok(())
}

/// Checks a principal name: 1 to 64 letters, digits, `_`, `-` or `.`.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(ServerError::InvalidArgument(format!(
            "principal name `{name}` must be 1 to 64 letters, digits, `_`, `-` or `.`"
        )))
    }
}

fn respond<T: Serialize>(r: Result<T>) -> Response {
    use axum::response::IntoResponse;
    match r {
        Ok(v) => Json(v).into_response(),
        Err(e) => error_response(&e),
    }
}

/// GET: every principal with its grants.
pub async fn list(State(pod): State<Arc<Pod>>, Extension(caller): Extension<Caller>) -> Response {
    respond((|| {
        require_admin(&caller)?;
        let grants = pod.catalog.grants()?;
        let principals: Vec<PrincipalInfo> = pod
            .catalog
            .principals()?
            .into_iter()
            .map(|p| PrincipalInfo {
                grants: grants
                    .iter()
                    .filter(|g| g.client_id == p.client_id)
                    .map(|g| format!("{} {}", g.privilege.as_str(), g.table))
                    .collect(),
                client_id: p.client_id,
                admin: p.admin,
            })
            .collect();
        Ok(serde_json::json!({ "principals": principals }))
    })())
}

/// POST: create a principal; the answer holds its secret, shown once.
pub async fn create(
    State(pod): State<Arc<Pod>>,
    Extension(caller): Extension<Caller>,
    Json(body): Json<CreatePrincipal>,
) -> Response {
    let created = (|| {
        require_admin(&caller)?;
        check_name(&body.name)?;
        let secret = generate_secret();
        let (salt, secret_hash) = hash_secret(&secret);
        pod.catalog.add_principal(PrincipalEntry {
            client_id: body.name.clone(),
            name: body.name.clone(),
            salt,
            secret_hash,
            admin: body.admin,
        })?;
        tracing::info!(client_id = %body.name, admin = body.admin, "principal created");
        Ok(CreatedPrincipal {
            client_id: body.name.clone(),
            client_secret: secret,
        })
    })();
    if created.is_ok() {
        let detail = if body.admin { "admin" } else { "" };
        audit::record(
            &pod,
            &caller,
            Action::PrincipalCreate,
            &body.name,
            detail.into(),
        )
        .await;
    }
    respond(created)
}

/// DELETE: remove a principal and its grants.
pub async fn delete(
    State(pod): State<Arc<Pod>>,
    Extension(caller): Extension<Caller>,
    Path(client_id): Path<String>,
) -> Response {
    let deleted = (|| {
        require_admin(&caller)?;
        let p = pod.catalog.delete_principal(&client_id)?;
        tracing::info!(client_id = %p.client_id, "principal deleted");
        Ok(p.client_id)
    })();
    if let Ok(id) = &deleted {
        audit::record(&pod, &caller, Action::PrincipalDelete, id, String::new()).await;
    }
    respond(deleted.map(|_| serde_json::json!({})))
}

/// POST: add a new signing key; older keys keep verifying.
pub async fn rotate_keys(
    State(pod): State<Arc<Pod>>,
    Extension(caller): Extension<Caller>,
) -> Response {
    let rotated = (|| {
        require_admin(&caller)?;
        let kid = pod.auth.rotate_keys()?;
        tracing::info!(%kid, "token signing key rotated");
        Ok(kid)
    })();
    if let Ok(kid) = &rotated {
        audit::record(&pod, &caller, Action::KeysRotate, kid, String::new()).await;
    }
    respond(rotated.map(|kid| serde_json::json!({ "kid": kid })))
}
