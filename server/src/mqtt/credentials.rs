//! The CONNECT packet's credentials as an identity: user name = client id and password =
//! client secret (checked like the token endpoint's, failures paced the same way), or
//! password = `Bearer <token>` (any user name). A refusal is a CONNACK reason code with
//! its reason string: 0x86 Bad user name or password (3.1.1: return code 4). What the
//! identity may write is checked per table ([`Identity::authorize_write`]).

use crate::auth::Caller;
use crate::catalog::Privilege;
use crate::config::AuthMode;
use crate::error::{Result as ServerResult, ServerError};
use crate::pod::Pod;

use super::wire::{reason, Connect};

/// A refused CONNECT: its MQTT 5 reason code and reason string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// MQTT 5 CONNACK reason code.
    pub code: u8,
    /// Why.
    pub reason: String,
}

fn bad(reason: impl Into<String>) -> Refused {
    Refused {
        code: reason::BAD_USER_NAME_OR_PASSWORD,
        reason: reason.into(),
    }
}

/// Who a connection writes as.
#[derive(Debug, Clone)]
pub enum Identity {
    /// A bearer token (or `--auth none`): its scope and its principal's grants.
    Caller(Caller),
    /// A principal by its client secret: its grants.
    Principal {
        /// Its client id.
        client_id: String,
    },
}

impl Identity {
    /// Whether this identity may write `table` (lower case) now: a token's scope and
    /// grants (`Authenticator::authorize_write`), or the principal's MODIFY grant (admins
    /// write every table); a deleted principal writes nothing.
    pub fn authorize_write(&self, pod: &Pod, table: &str) -> ServerResult<()> {
        let client_id = match self {
            Identity::Caller(caller) => return pod.auth.authorize_write(caller, table),
            Identity::Principal { client_id } => client_id,
        };
        let catalog = pod.auth.catalog();
        let principal = catalog.principal(client_id)?.ok_or_else(|| {
            ServerError::Unauthenticated(format!("principal `{client_id}` no longer exists"))
        })?;
        if principal.admin || catalog.has_grant(client_id, table, Privilege::Modify)? {
            return Ok(());
        }
        Err(ServerError::PermissionDenied(format!(
            "principal `{client_id}` holds no MODIFY on table `{table}`"
        )))
    }
}

/// The identity `connect` authenticates as.
pub fn authenticate(pod: &Pod, connect: &Connect) -> Result<Identity, Refused> {
    if pod.auth.mode() == AuthMode::None {
        return Ok(Identity::Caller(Caller::Anonymous));
    }
    let password = connect
        .password
        .as_deref()
        .ok_or_else(|| bad("no password: send the client secret or `Bearer <token>`"))?;
    let password = std::str::from_utf8(password)
        .map_err(|_| bad("the password is not UTF-8"))?
        .trim();
    if password.starts_with("Bearer ") || password.starts_with("bearer ") {
        return pod
            .auth
            .verify_bearer(Some(password))
            .map(Identity::Caller)
            .map_err(|e| bad(e.to_string()));
    }
    let client_id = connect
        .username
        .as_deref()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| bad("no user name: send the client id as the user name"))?;
    let pacer = pod.auth.pacer();
    if let Err(wait) = pacer.check(client_id) {
        return Err(bad(format!(
            "too many failed attempts for client `{client_id}`; retry in {} s",
            wait.as_secs() + 1
        )));
    }
    match pod.auth.check_client(client_id, password) {
        Ok(p) => {
            pacer.succeeded(client_id);
            Ok(Identity::Principal {
                client_id: p.client_id,
            })
        }
        Err(_) => {
            pacer.failed(client_id);
            Err(bad("invalid client id or secret"))
        }
    }
}
