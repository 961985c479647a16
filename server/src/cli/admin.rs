//! The `sluice principal …`, `sluice grant …` / `revoke …` and
//! `sluice keys rotate` commands: clients of the admin API
//! (`/api/sluice/v1/…`) and of the Unity-Catalog-shaped permissions API.

use reqwest::Method;

use super::Client;
use crate::catalog::Privilege;
use crate::error::{Result, ServerError};
use crate::http::{CreatedPrincipal, PermissionChange, PermissionsUpdate, PrincipalInfo};

/// A parsed `PRIVILEGE[,PRIVILEGE] ON TABLE c.s.t TO|FROM NAME`.
#[derive(Debug, PartialEq, Eq)]
pub struct GrantArgs {
    /// The privileges.
    pub privileges: Vec<Privilege>,
    /// `catalog.schema.table`.
    pub table: String,
    /// The principal's client id.
    pub principal: String,
}

/// Parses the words after `sluice grant` / `sluice revoke`.
pub fn parse_grant(words: &[String]) -> Result<GrantArgs> {
    let usage = || {
        ServerError::InvalidArgument(
            "expected `MODIFY|SELECT[,…] ON TABLE catalog.schema.table TO|FROM NAME`".into(),
        )
    };
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    let [privs, on, kind, table, to, principal] = w.as_slice() else {
        return Err(usage());
    };
    if !on.eq_ignore_ascii_case("on")
        || !kind.eq_ignore_ascii_case("table")
        || !(to.eq_ignore_ascii_case("to") || to.eq_ignore_ascii_case("from"))
    {
        return Err(usage());
    }
    let mut privileges = Vec::new();
    for p in privs.split(',') {
        privileges.push(Privilege::parse(p).ok_or_else(|| {
            ServerError::InvalidArgument(format!("unknown privilege `{p}` (MODIFY or SELECT)"))
        })?);
    }
    Ok(GrantArgs {
        privileges,
        table: table.to_string(),
        principal: principal.to_string(),
    })
}

impl Client {
    /// Creates a principal; the answer carries its secret (shown once).
    pub async fn create_principal(&self, name: &str, admin: bool) -> Result<CreatedPrincipal> {
        let body = serde_json::json!({ "name": name, "admin": admin });
        let v = self
            .send(
                self.api(Method::POST, "/api/sluice/v1/principals")
                    .json(&body),
            )
            .await?;
        serde_json::from_value(v)
            .map_err(|e| ServerError::Internal(format!("unexpected answer: {e}")))
    }

    /// Lists principals with their grants.
    pub async fn list_principals(&self) -> Result<Vec<PrincipalInfo>> {
        let v = self
            .send(self.api(Method::GET, "/api/sluice/v1/principals"))
            .await?;
        serde_json::from_value(v["principals"].clone())
            .map_err(|e| ServerError::Internal(format!("unexpected answer: {e}")))
    }

    /// Deletes a principal and its grants.
    pub async fn delete_principal(&self, name: &str) -> Result<()> {
        self.send(self.api(Method::DELETE, &format!("/api/sluice/v1/principals/{name}")))
            .await?;
        Ok(())
    }

    /// Grants (`add`) or revokes privileges on a table.
    pub async fn change_grants(&self, args: &GrantArgs, add: bool) -> Result<()> {
        let names: Vec<String> = args
            .privileges
            .iter()
            .map(|p| p.as_str().to_string())
            .collect();
        let change = if add {
            PermissionChange {
                principal: args.principal.clone(),
                add: names,
                remove: Vec::new(),
            }
        } else {
            PermissionChange {
                principal: args.principal.clone(),
                add: Vec::new(),
                remove: names,
            }
        };
        let body = PermissionsUpdate {
            changes: vec![change],
        };
        let path = format!("/api/2.1/unity-catalog/permissions/table/{}", args.table);
        self.send(self.api(Method::PATCH, &path).json(&body))
            .await?;
        Ok(())
    }

    /// Adds a new token-signing key; returns its id.
    pub async fn rotate_keys(&self) -> Result<String> {
        let v = self
            .send(self.api(Method::POST, "/api/sluice/v1/keys/rotate"))
            .await?;
        Ok(v["kid"].as_str().unwrap_or_default().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn grant_words_parse_and_bad_ones_name_the_shape() {
        let g = parse_grant(&words("MODIFY,select ON TABLE a.b.c TO dev-1")).expect("parse");
        assert_eq!(g.privileges, vec![Privilege::Modify, Privilege::Select]);
        assert_eq!((g.table.as_str(), g.principal.as_str()), ("a.b.c", "dev-1"));
        assert!(parse_grant(&words("MODIFY ON a.b.c TO x")).is_err());
        assert!(parse_grant(&words("WRITE ON TABLE a.b.c TO x")).is_err());
    }
}
