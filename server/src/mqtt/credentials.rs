//! The CONNECT packet's credentials as a caller: user name = client id and password =
//! client secret (checked like the token endpoint's, failures paced the same way), or
//! password = `Bearer <token>` (any user name). A refusal is a CONNACK reason code with
//! its reason string: 0x86 Bad user name or password (3.1.1: return code 4).

use crate::auth::{Caller, Claims};
use crate::config::AuthMode;
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

/// The caller `connect` authenticates as.
pub fn authenticate(pod: &Pod, connect: &Connect) -> Result<Caller, Refused> {
    if pod.auth.mode() == AuthMode::None {
        return Ok(Caller::Anonymous);
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
    let principal = match pod.auth.check_client(client_id, password) {
        Ok(p) => {
            pacer.succeeded(client_id);
            p
        }
        Err(_) => {
            pacer.failed(client_id);
            return Err(bad("invalid client id or secret"));
        }
    };
    // The principal's own rights: every table it holds MODIFY on (checked per table by
    // `authorize_write`), or all of them as an admin.
    Ok(Caller::Token(Claims {
        sub: principal.client_id.clone(),
        iat: 0,
        exp: 0,
        tables: vec!["*".into()],
        select: Vec::new(),
        admin: principal.admin,
        peer: false,
    }))
}
