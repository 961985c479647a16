//! `sluice principal create|list|delete` and `sluice grant …` / `revoke …`:
//! clients of the admin API (`/api/sluice/v1/principals`) and of the
//! Unity-Catalog-shaped permissions API.

use clap::Subcommand;
use reqwest::Method;
use sluice_server::catalog::Privilege;
use sluice_server::http::{CreatedPrincipal, PermissionChange, PermissionsUpdate, PrincipalInfo};
use sluice_server::{Result, ServerError};

use super::client::{parse_answer, Client, ConnArgs};

/// The principal commands.
#[derive(Subcommand)]
pub enum PrincipalCommand {
    /// Create a principal; prints its client id and secret once.
    Create {
        /// Name, also the OAuth client id.
        name: String,
        /// Let it manage the catalog.
        #[arg(long)]
        admin: bool,
    },
    /// List principals and their grants.
    List,
    /// Delete a principal and its grants.
    Delete {
        /// Client id.
        name: String,
    },
}

/// Runs a principal command against the pod of `conn`.
pub async fn run(conn: ConnArgs, command: PrincipalCommand) -> anyhow::Result<()> {
    let client = conn.connect().await?;
    match command {
        PrincipalCommand::Create { name, admin } => {
            let p = client.create_principal(&name, admin).await?;
            println!(
                "Created principal {} (the secret is shown only once):",
                p.client_id
            );
            println!("  SLUICE_CLIENT_ID={}", p.client_id);
            println!("  SLUICE_CLIENT_SECRET={}", p.client_secret);
        }
        PrincipalCommand::List => {
            for p in client.list_principals().await? {
                let role = if p.admin { " (admin)" } else { "" };
                println!("{}{role}", p.client_id);
                for g in p.grants {
                    println!("  {g}");
                }
            }
        }
        PrincipalCommand::Delete { name } => {
            client.delete_principal(&name).await?;
            println!("deleted principal {name}");
        }
    }
    Ok(())
}

/// `sluice grant` (`add`) or `sluice revoke`: parses `words`, sends the change.
pub async fn change_grants(conn: ConnArgs, words: &[String], add: bool) -> anyhow::Result<()> {
    let grant = parse_grant(words)?;
    let client = conn.connect().await?;
    client.change_grants(&grant, add).await?;
    let privs: Vec<&str> = grant.privileges.iter().map(|p| p.as_str()).collect();
    let (verb, prep) = if add {
        ("granted", "to")
    } else {
        ("revoked", "from")
    };
    println!(
        "{verb} {} on table {} {prep} {}",
        privs.join(","),
        grant.table,
        grant.principal
    );
    Ok(())
}

/// A parsed `PRIVILEGE[,PRIVILEGE] ON TABLE c.s.t TO|FROM NAME`.
#[derive(Debug, PartialEq, Eq)]
pub struct GrantWords {
    /// The privileges.
    pub privileges: Vec<Privilege>,
    /// `catalog.schema.table`.
    pub table: String,
    /// The principal's client id.
    pub principal: String,
}

/// Parses the words after `sluice grant` / `sluice revoke`.
pub fn parse_grant(words: &[String]) -> Result<GrantWords> {
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
    Ok(GrantWords {
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
        parse_answer(v)
    }

    /// Lists principals with their grants.
    pub async fn list_principals(&self) -> Result<Vec<PrincipalInfo>> {
        let v = self
            .send(self.api(Method::GET, "/api/sluice/v1/principals"))
            .await?;
        parse_answer(v["principals"].clone())
    }

    /// Deletes a principal and its grants.
    pub async fn delete_principal(&self, name: &str) -> Result<()> {
        self.send(self.api(Method::DELETE, &format!("/api/sluice/v1/principals/{name}")))
            .await?;
        Ok(())
    }

    /// Grants (`add`) or revokes privileges on a table.
    pub async fn change_grants(&self, grant: &GrantWords, add: bool) -> Result<()> {
        let names: Vec<String> = grant
            .privileges
            .iter()
            .map(|p| p.as_str().to_string())
            .collect();
        let (add, remove) = if add {
            (names, Vec::new())
        } else {
            (Vec::new(), names)
        };
        let body = PermissionsUpdate {
            changes: vec![PermissionChange {
                principal: grant.principal.clone(),
                add,
                remove,
            }],
        };
        let path = format!("/api/2.1/unity-catalog/permissions/table/{}", grant.table);
        self.send(self.api(Method::PATCH, &path).json(&body))
            .await?;
        Ok(())
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
